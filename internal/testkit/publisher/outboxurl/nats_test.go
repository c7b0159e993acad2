package outboxurl_test

import (
	"context"
	"crypto/rand"
	"net"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/internal/testtls"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxnats"
	"github.com/txoutbox/outbox/publisher/outboxurl"
)

var natsTestURL = brokertest.NATSURL

// natsStream creates a stream "<name>.>" on the local server through a
// connection of its own and returns the name and that JetStream context.
func natsStream(t *testing.T) (string, jetstream.JetStream) {
	t.Helper()
	_, js := brokertest.JetStream(t, natsTestURL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "outboxurl_" + strconv.FormatUint(uint64(b[0])<<40|uint64(b[1])<<32|uint64(b[2])<<24|uint64(b[3])<<16|uint64(b[4])<<8|uint64(b[5]), 36)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Storage: jetstream.MemoryStorage}); err != nil {
		testdb.Unavailable(t, "JetStream at "+natsTestURL, err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	return name, js
}

func TestOpenNATS(t *testing.T) {
	t.Parallel()
	stream, js := natsStream(t)
	u, _ := url.Parse(natsTestURL)
	for _, raw := range []string{
		natsTestURL,
		natsTestURL + "?name=orders-relay&max_pending=16&reconnect_wait=250ms&connect_timeout=2s",
		"nats://" + u.Host + "," + u.Host,
		"NATS://" + u.Host + "/",
	} {
		p := openAs[*outboxnats.Publisher](t, raw, nil)
		env := &publisher.Envelope{ID: "id-" + strconv.Itoa(int(time.Now().UnixNano())), Topic: "order.created", Destination: stream + ".order.created", Payload: []byte(`{}`),
			Headers: map[string]string{publisher.HeaderTopic: "order.created", publisher.HeaderContentType: "application/json"}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		errs := p.Publish(ctx, []*publisher.Envelope{env})
		cancel()
		if errs[0] != nil {
			t.Fatalf("Open(%q): publish: %v", raw, errs[0])
		}
		if err := p.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if errs := p.Publish(context.Background(), []*publisher.Envelope{env}); errs[0] == nil {
			t.Fatalf("Open(%q): publish after Close succeeded", raw)
		}
	}
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(context.Background()); err != nil || info.State.Msgs != 4 {
		t.Fatalf("stream holds %v messages (%v), want 4", info.State.Msgs, err)
	}
}

func TestOpenNATSErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw  string
		want []string
	}{
		{"nats://", []string{"no host"}},
		{"nats:relative", []string{"no host"}},
		{"nats://h:4222/stream", []string{"no path"}},
		{"nats://h:4222#frag", []string{"no fragment"}},
		{"nats://h:4222,,h2:4222", []string{"empty host"}},
		{"nats://h:99999", []string{"bad port"}},
		{"nats://h:4222?stream=orders", []string{`unknown parameter "stream"`, "max_pending", "server_name"}},
		{"nats://h:4222?max_pending=0", []string{"max_pending", "positive integer"}},
		{"nats://h:4222?max_pending=many", []string{"max_pending"}},
		{"nats://h:4222?reconnect_wait=soon", []string{"reconnect_wait", "duration"}},
		{"nats://h:4222?connect_timeout=-1s", []string{"connect_timeout"}},
		{"nats://h:4222?name=a&name=b", []string{`"name" given 2 times`}},
		{"nats://alice:pw1secret@h:4222?token=tok1secret", []string{"not both", "alice:xxxxx@", "token=xxxxx"}},
		{"nats://h:4222?tls=maybe", []string{"tls"}},
		{"nats://h:4222?cert_file=/x.pem", []string{"cert_file and key_file go together"}},
		{"nats://h:4222?ca_file=/nonexistent/ca.pem", []string{"ca_file"}},
	} {
		openFails(t, tc.raw, nil, tc.want, "pw1secret", "tok1secret")
	}
	// A server that does not answer is no error (TestOpenUnreachable).
}

// tls=true against a server without TLS fails instead of falling back to
// plain text.
func TestOpenNATSNoPlaintextFallback(t *testing.T) {
	t.Parallel()
	natsStream(t) // fail or skip when the server is missing
	p, err := outboxurl.Open(natsTestURL+"?tls=true&connect_timeout=2s", nil)
	if err == nil {
		_ = p.Close()
		t.Fatal("tls=true connected to a server without TLS")
	}
	if !strings.Contains(err.Error(), "cannot connect") {
		t.Fatalf("error %q", err)
	}
}

// A TLS server of the test's own requiring client certificates: the URL's
// ca_file, cert_file, key_file and server_name are all used, and leaving
// any out fails.
func TestOpenNATSTLS(t *testing.T) {
	t.Parallel()
	bin := brokertest.NATSServer(t)
	ca := testtls.NewCA(t)
	server, client := ca.Server(t, "server", "nats.test"), ca.Client(t, "client")
	port := brokertest.FreePort(t)
	cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port),
		"--tls", "--tlscert", server.CertFile, "--tlskey", server.KeyFile, "--tlsverify", "--tlscacert", ca.File)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server with TLS did not listen: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	q := func(params ...string) string {
		return "nats://" + addr + "?connect_timeout=3s&" + strings.Join(params, "&")
	}
	caFile, cert, key, sn := "ca_file="+ca.File, "cert_file="+client.CertFile, "key_file="+client.KeyFile, "server_name=nats.test"
	p, err := outboxurl.Open(q(caFile, cert, key, sn), nil)
	if err != nil {
		t.Fatalf("TLS with CA, client certificate and server name: %v", err)
	}
	_ = p.Close()
	for _, tc := range []struct{ name, raw, want string }{
		{"no server_name (certificate is for nats.test)", q(caFile, cert, key), "x509"},
		{"no ca_file", q(cert, key, sn), "unknown authority"},
		{"no client certificate", q(caFile, sn), "tls"},
	} {
		p, err := outboxurl.Open(tc.raw, nil)
		if err == nil {
			_ = p.Close()
			t.Errorf("%s: connected", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q does not say %q", tc.name, err, tc.want)
		}
	}
}
