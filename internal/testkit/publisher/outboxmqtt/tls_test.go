package outboxmqtt_test

import (
	"crypto/tls"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/syncbuf"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testtls"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxmqtt"
	"github.com/txoutbox/outbox/publisher/outboxurl"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// TestTLS publishes over mqtts:// to a Mosquitto TLS listener, opened from
// a URL as the command line does: the URL's CA verifies the broker, and
// without it (or with another server name) verification fails and nothing
// is sent.
func TestTLS(t *testing.T) {
	t.Parallel()
	ca := testtls.NewCA(t)
	srv := ca.Server(t, "server", "127.0.0.1", "mqtt.test")
	m := startMosquitto(t, "certfile "+srv.CertFile+"\nkeyfile "+srv.KeyFile+"\n")
	base := "mqtts://" + m.addr + "?connect_timeout=2s&" + outboxurl.ParamCAFile + "=" + url.QueryEscape(ca.File)
	open := func(raw string) publisher.Publisher {
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
	relaytest.WaitFor(t, 20*time.Second, "a publish over TLS", func() bool {
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
		var logs syncbuf.Buffer
		p := dial(t, m.addr, &outboxmqtt.DialConfig{
			TLS:    tlsConfig(t, u),
			Config: outboxmqtt.Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
		})
		err = publish(p, 10*time.Second, env("tls.orders", "k", `2`))[0]
		publishertest.WantClass(t, "publish over unverifiable TLS ("+raw+")", err, publisher.ClassUnavailable)
		relaytest.WaitFor(t, 10*time.Second, "a certificate error in the log", func() bool { return strings.Contains(logs.String(), "certificate") })
	}
	// The certificate's other name verifies when asked for.
	p = open(base + "&" + outboxurl.ParamServerName + "=mqtt.test")
	relaytest.WaitFor(t, 20*time.Second, "a publish verified against server_name", func() bool {
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
