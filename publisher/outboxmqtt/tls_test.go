package outboxmqtt_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/publisher/outboxmqtt"
	"github.com/txoutbox/outbox/publisher/outboxurl"
)

// writeCerts writes a CA and a server certificate for 127.0.0.1 signed by
// it into dir, and returns their paths.
func writeCerts(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "outbox test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "mosquitto"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"mqtt.test"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", der), write("server.key", "EC PRIVATE KEY", keyDER)
}

// TestTLS publishes over mqtts:// to a Mosquitto TLS listener, opened from
// a URL as the command line does: the URL's CA verifies the broker, and
// without it (or with another server name) verification fails and nothing
// is sent.
func TestTLS(t *testing.T) {
	t.Parallel()
	caFile, certFile, keyFile := writeCerts(t, t.TempDir())
	m := startMosquitto(t, "certfile "+certFile+"\nkeyfile "+keyFile+"\n")
	base := "mqtts://" + m.addr + "?connect_timeout=2s&" + outboxurl.ParamCAFile + "=" + url.QueryEscape(caFile)
	open := func(raw string) outbox.Publisher {
		t.Helper()
		p, err := outboxurl.Open(raw, nil)
		if err != nil {
			t.Fatalf("Open(%s): %v", raw, err)
		}
		t.Cleanup(func() { _ = p.Close() })
		if _, ok := p.(*outboxmqtt.Publisher); !ok {
			t.Fatalf("Open(%s) = %T", raw, p)
		}
		return p
	}

	p := open(base)
	var err error
	waitFor(t, 20*time.Second, "a publish over TLS", func() bool {
		err = publish(p, 5*time.Second, env("tls.orders", "k", `1`))[0]
		return err == nil
	})

	for _, raw := range []string{
		"mqtts://" + m.addr + "?connect_timeout=2s",            // system roots do not know the test CA
		base + "&" + outboxurl.ParamServerName + "=other.test", // the certificate names 127.0.0.1 and mqtt.test
	} {
		u, err := url.Parse(strings.Replace(raw, "mqtts://", "//", 1))
		if err != nil {
			t.Fatal(err)
		}
		var logs syncBuffer
		p := dial(t, m.addr, &outboxmqtt.DialConfig{
			TLS:    tlsConfig(t, u),
			Config: outboxmqtt.Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
		})
		err = publish(p, 10*time.Second, env("tls.orders", "k", `2`))[0]
		wantClass(t, "publish over unverifiable TLS ("+raw+")", err, outbox.ClassUnavailable)
		waitFor(t, 10*time.Second, "a certificate error in the log", func() bool { return strings.Contains(logs.String(), "certificate") })
	}
	// The certificate's other name verifies when asked for.
	p = open(base + "&" + outboxurl.ParamServerName + "=mqtt.test")
	waitFor(t, 20*time.Second, "a publish verified against server_name", func() bool {
		err = publish(p, 5*time.Second, env("tls.orders", "k", `3`))[0]
		return err == nil
	})
}

// tlsConfig is the TLS configuration the URL's parameters ask for.
func tlsConfig(t *testing.T, u *url.URL) *tls.Config {
	t.Helper()
	cfg, err := outboxurl.TLSConfig(u, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// syncBuffer is a bytes.Buffer safe for a logger and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
