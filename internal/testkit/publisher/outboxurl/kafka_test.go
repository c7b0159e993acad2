package outboxurl_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/txoutbox/outbox/internal/testtls"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxkafka"
	"github.com/txoutbox/outbox/publisher/outboxurl"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// kafkaCluster starts an in-process Kafka (kfake) with topic "orders".
func kafkaCluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, "orders")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func openKafka(t *testing.T, raw string, opts *outboxurl.Options) *outboxkafka.Publisher {
	t.Helper()
	return openAs[*outboxkafka.Publisher](t, raw, opts)
}

// kafkaPublish publishes one message to "orders" and returns its result.
func kafkaPublish(p publisher.Publisher, d time.Duration) (*publisher.Envelope, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	env := publishertest.Envelope("orders", "k", []byte(`{"n":1}`), "application/json", nil)
	return env, p.Publish(ctx, []*publisher.Envelope{env})[0]
}

// kafkaHasID reads "orders" from c until the message id shows up.
func kafkaHasID(t *testing.T, c *kfake.Cluster, id string, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		for _, r := range cl.PollFetches(ctx).Records() {
			for _, h := range r.Headers {
				if h.Key == outboxkafka.HeaderMessageID && string(h.Value) == id {
					return
				}
			}
		}
	}
	t.Fatalf("message %s did not arrive", id)
}

func TestOpenKafka(t *testing.T) {
	t.Parallel()
	c := kafkaCluster(t)
	addr := c.ListenAddrs()[0]
	_, port, _ := net.SplitHostPort(addr)
	for _, raw := range []string{
		"kafka://" + addr,
		"KAFKA://" + addr + "/",
		"kafka://" + addr + ",localhost:" + port + "?client_id=billing-relay",
		"kafka://" + addr + "?auto_create_topics=false",
	} {
		p := openKafka(t, raw, nil)
		env, err := kafkaPublish(p, 15*time.Second)
		if err != nil {
			t.Fatalf("Open(%q): publish: %v", raw, err)
		}
		kafkaHasID(t, c, env.ID)
	}
	if got := openKafka(t, "kafka://"+addr+"?client_id=billing-relay", nil).Client().OptValue(kgo.ClientID); got != "billing-relay" {
		t.Errorf("client_id: client id %v", got)
	}
	if got := openKafka(t, "kafka://"+addr+"?auto_create_topics=true", nil).Client().OptValue(kgo.AllowAutoTopicCreation); got != true {
		t.Errorf("auto_create_topics=true: client asks for auto creation = %v", got)
	}
	for _, tc := range []struct {
		timeout, want time.Duration
	}{
		{0, outboxkafka.DefaultRecordDeliveryTimeout},
		{15 * time.Second, outboxkafka.DefaultRecordDeliveryTimeout},
		{6 * time.Second, 4 * time.Second},
		{time.Second, time.Second},
	} {
		p := openKafka(t, "kafka://"+addr, &outboxurl.Options{Timeout: tc.timeout})
		if got := p.Client().OptValue(kgo.RecordDeliveryTimeout); got != tc.want {
			t.Errorf("publish timeout %v: record delivery timeout %v, want %v", tc.timeout, got, tc.want)
		}
	}
	// No connection is made at Open: an unreachable broker is the relay's
	// to pause on, not a configuration error.
	p := openKafka(t, "kafka://127.0.0.1:1,127.0.0.1:2", nil)
	if _, err := kafkaPublish(p, 5*time.Second); publisher.Classify(err) != publisher.ClassUnavailable {
		t.Errorf("publish to a closed port: %v (%v), want unavailable", err, publisher.Classify(err))
	}
}

func TestOpenKafkaErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		raw  string
		want []string
	}{
		{"kafka://", []string{"no broker address"}},
		{"kafka:broker:9092", []string{"no broker address"}},
		{"kafka://b:9092/orders", []string{"no path"}},
		{"kafka://b:9092#x", []string{"fragment"}},
		{"kafka://b1:9092,,b2:9092", []string{"empty broker address"}},
		{"kafka://b:9092?acks=1&linger=5", []string{`unknown parameter "acks", "linger"`, "client_id"}},
		{"kafka://b:9092?client_id=", []string{"client_id is empty"}},
		{"kafka://b:9092?client_id=a&client_id=b", []string{`"client_id" given 2 times`}},
		{"kafka://b:9092?auto_create_topics=maybe", []string{"auto_create_topics", "true or false"}},
		{"kafka://b:9092?tls=maybe", []string{"tls", "true or false"}},
		{"kafka://b:9092?ca_file=" + filepath.Join(dir, "missing.pem"), []string{"ca_file"}},
		{"kafka://b:9092?cert_file=/c.pem", []string{"cert_file and key_file go together"}},
		{"kafka://app:kafkapass@b:9092", []string{"need sasl=", "app:xxxxx@"}},
		{"kafka://app@b:9092?sasl=plain", []string{"needs user:password@"}},
		{"kafka://b:9092?sasl=plain", []string{"needs user:password@"}},
		{"kafka://app:kafkapass@b:9092?sasl=gssapi", []string{`sasl="gssapi"`, "scram-sha-512"}},
		{"kafka://app:kafka%2Fpass@b:9092?sasl=oauth", []string{`sasl="oauth"`}},
	} {
		openFails(t, tc.raw, nil, tc.want, "kafkapass", "kafka/pass", "kafka%2Fpass")
	}
}

// SASL/SCRAM and PLAIN credentials from the URL authenticate; wrong ones
// fail without the password in any error.
func TestOpenKafkaSASL(t *testing.T) {
	t.Parallel()
	c := kafkaCluster(t, kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "relay", "scram-s3cret"),
		kfake.Superuser("SCRAM-SHA-512", "relay512", "scram512-s3cret"),
		kfake.Superuser("PLAIN", "plainuser", "plain-s3cret"))
	addr := c.ListenAddrs()[0]
	admin := scram.Auth{User: "relay", Pass: "scram-s3cret"}.AsSha256Mechanism()
	for _, raw := range []string{
		"kafka://relay:scram-s3cret@" + addr + "?sasl=scram-sha-256",
		"kafka://relay512:scram512-s3cret@" + addr + "?sasl=SCRAM-SHA-512",
		"kafka://plainuser:plain-s3cret@" + addr + "?sasl=plain",
	} {
		env, err := kafkaPublish(openKafka(t, raw, nil), 15*time.Second)
		if err != nil {
			t.Fatalf("%s: publish: %v", outboxurl.Redact(raw), err)
		}
		kafkaHasID(t, c, env.ID, kgo.SASL(admin))
	}
	p := openKafka(t, "kafka://relay:wrong-s3cret@"+addr+"?sasl=scram-sha-256", nil)
	_, err := kafkaPublish(p, 3*time.Second)
	if err == nil {
		t.Fatal("publish with a wrong password succeeded")
	}
	if strings.Contains(err.Error(), "wrong-s3cret") {
		t.Fatalf("error leaks the password: %v", err)
	}
}

// TLS with a private CA: the client checks each broker's certificate
// against the host it dials, so a list of brokers under different names
// works without server_name.
func TestOpenKafkaTLS(t *testing.T) {
	t.Parallel()
	ca := testtls.NewCA(t)
	serverCert := ca.Server(t, "kafka", "localhost", "127.0.0.1").TLS
	c := kafkaCluster(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12}))
	_, port, _ := net.SplitHostPort(c.ListenAddrs()[0])
	raw := "kafka://127.0.0.1:" + port + ",localhost:" + port + "?ca_file=" + ca.File
	if _, err := kafkaPublish(openKafka(t, raw, nil), 15*time.Second); err != nil {
		t.Fatalf("publish over TLS: %v", err)
	}
	// Without the CA the broker is not trusted: nothing is delivered.
	p := openKafka(t, "kafka://127.0.0.1:"+port+"?tls=true", nil)
	if _, err := kafkaPublish(p, 10*time.Second); publisher.Classify(err) != publisher.ClassUnavailable || !strings.Contains(fmt.Sprint(err), "certificate") {
		t.Fatalf("publish to a broker with an untrusted certificate: %v (%v), want unavailable naming the certificate", err, publisher.Classify(err))
	}
	// server_name pins the name checked: a wrong one fails.
	p = openKafka(t, raw+"&server_name=other.example", nil)
	if _, err := kafkaPublish(p, 3*time.Second); err == nil {
		t.Fatal("publish with a server_name the certificate does not hold succeeded")
	}
}

// FuzzOpenKafka checks that no kafka URL panics Open, and that its errors
// are one line without the URL's password.
func FuzzOpenKafka(f *testing.F) {
	for _, s := range []string{
		"kafka://b:9092", "kafka://u:longpassword@b1:9092,b2:9092?sasl=scram-sha-512",
		"kafka://b:9092?client_id=x&tls=true&server_name=n", "kafka://,", "kafka://u:p@:9092?sasl=plain",
		"kafka://b:9092?auto_create_topics=1&x=%zz", "kafka://[::1]:9092", "kafka://aaaA#00\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !strings.HasPrefix(strings.ToLower(raw), "kafka:") {
			raw = "kafka://" + raw
		}
		p, err := outboxurl.Open(raw, nil)
		if err == nil {
			_ = p.Close()
			return
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") {
			t.Fatalf("error is not one line: %q", msg)
		}
		u, perr := url.Parse(raw)
		if perr != nil || u.User == nil {
			return
		}
		if pw, ok := u.User.Password(); ok && len(pw) >= 8 && !strings.Contains(outboxurl.Redact(raw), pw) && strings.Contains(msg, pw) {
			t.Fatalf("error %q leaks the password", msg)
		}
	})
}
