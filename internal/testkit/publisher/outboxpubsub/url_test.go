package outboxpubsub_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
	"github.com/txoutbox/outbox/publisher/outboxpubsub"
)

func openURL(t *testing.T, raw string, ce *outboxce.Format) (publisher.Publisher, error) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	p, err := outboxpubsub.OpenURL(u, ce, nil)
	if err == nil {
		t.Cleanup(func() { _ = p.Close() })
	}
	return p, err
}

// TestOpenURLEndpoint opens pubsub://PROJECT/TOPIC?endpoint= against
// pstest (plain gRPC, no credentials) and delivers; ordering=false sends
// no ordering key; pubsub://PROJECT sends each message to the topic its
// destination names.
func TestOpenURLEndpoint(t *testing.T) {
	t.Parallel()
	srv := fakeServer(t)
	c := newClient(t, srv.Addr)
	fixed := createTopic(t, c, randomID("fixed-"))
	named := createTopic(t, c, randomID("named-"))

	p, err := openURL(t, "pubsub://"+project+"/"+fixed+"?endpoint="+srv.Addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if errs := publish(t, p, envelope("ignored.destination", "k", `1`)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if m := stored(t, srv, fixed, 1, 10*time.Second)[0]; m.OrderingKey != "k" {
		t.Fatalf("ordering key %q, want k", m.OrderingKey)
	}

	p2, err := openURL(t, "pubsub://"+project+"?ordering=false&endpoint="+srv.Addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rp := p2.(publisher.RunPublisher); rp.PublishesRuns() {
		t.Fatal("ordering=false publishes runs")
	}
	if errs := publish(t, p2, envelope(named, "k", `2`)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if m := stored(t, srv, named, 1, 10*time.Second)[0]; m.OrderingKey != "" {
		t.Fatalf("ordering key %q with ordering=false", m.OrderingKey)
	}
	if err := p2.Close(); err != nil {
		t.Fatal(err)
	}
	if errs := publish(t, p2, envelope(named, "k", `3`)); errs[0] == nil {
		t.Fatal("publish after Close succeeded")
	}
}

// TestOpenURLEmulatorHost: without endpoint, PUBSUB_EMULATOR_HOST sends
// the client to the emulator, as the Pub/Sub client does by itself.
func TestOpenURLEmulatorHost(t *testing.T) {
	srv := fakeServer(t)
	c := newClient(t, srv.Addr)
	topic := createTopic(t, c, randomID("topic-"))
	t.Setenv("PUBSUB_EMULATOR_HOST", srv.Addr)
	p, err := openURL(t, "pubsub://"+project+"/"+topic, &outboxce.Format{Mode: outboxce.Binary})
	if err != nil {
		t.Fatal(err)
	}
	if errs := publish(t, p, envelope(topic, "k", `1`)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if m := stored(t, srv, topic, 1, 10*time.Second)[0]; m.Attributes["ce-specversion"] != "1.0" {
		t.Fatalf("format=cloudevents not applied: %v", m.Attributes)
	}
}

// TestOpenURLErrors: a bad URL is a one-line error that says what is
// wrong.
func TestOpenURLErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		url, says string
		ce        *outboxce.Format
	}{
		{"pubsub:///orders", "no project", nil},
		{"pubsub://proj/orders?color=red&size=1", "unknown parameter(s) color, size", nil},
		{"pubsub://proj/orders?ordering=maybe", "want true or false", nil},
		{"pubsub://proj/orders?endpoint=nohost", "want HOST:PORT", nil},
		{"pubsub://proj/orders?endpoint=a:1&region=europe-west1", "exclude each other", nil},
		{"pubsub://proj/orders?region=Europe%20West", "region name", nil},
		{"pubsub://proj/orders?endpoint=a:1&endpoint=b:2", "more than once", nil},
		{"pubsub://proj/a/b", "invalid topic", nil},
		{"pubsub://proj/goog-x", "reserved", nil},
		{"pubsub://user:secret@proj/orders", "no user or password", nil},
		{"pubsub://proj:8085/orders", "?endpoint=HOST:PORT", nil},
		{"pubsub://proj/orders?endpoint=127.0.0.1:1", "is for webhooks", &outboxce.Format{Mode: outboxce.Structured}},
	}
	for _, tc := range cases {
		_, err := openURL(t, tc.url, tc.ce)
		if err == nil {
			t.Errorf("%s: opened", tc.url)
			continue
		}
		if !strings.Contains(err.Error(), tc.says) || strings.ContainsAny(err.Error(), "\r\n") || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error %q, want one line saying %q without secrets", tc.url, err, tc.says)
		}
	}
}

// TestNewRefusesBadConfig: New names the bad field.
func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	c := newClient(t, fakeServer(t).Addr)
	for _, tc := range []struct {
		cfg  *outboxpubsub.Config
		says string
	}{
		{&outboxpubsub.Config{PublishTimeout: -1}, "PublishTimeout"},
		{&outboxpubsub.Config{ThrottleDelay: -1}, "ThrottleDelay"},
		{&outboxpubsub.Config{Topic: "x"}, "Config.Topic"},
		{&outboxpubsub.Config{CloudEvents: &outboxce.Format{Mode: outboxce.Structured}}, "structured"},
	} {
		if _, err := outboxpubsub.New(c, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("New(%+v): %v, want an error naming %s", tc.cfg, err, tc.says)
		}
	}
	if _, err := outboxpubsub.New(nil, nil); err == nil {
		t.Error("New(nil) succeeded")
	}
}

// TestOpenURLBadCredentials: Application Default Credentials that cannot
// be loaded make a one-line error.
func TestOpenURLBadCredentials(t *testing.T) {
	t.Setenv("PUBSUB_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", t.TempDir()+"/missing.json")
	_, err := openURL(t, "pubsub://proj/orders", nil)
	if err == nil || !strings.Contains(err.Error(), "cannot make a Pub/Sub client") || strings.ContainsAny(err.Error(), "\r\n") {
		t.Fatalf("error %q, want one line saying the client could not be made", err)
	}
	t.Log(err)
}
