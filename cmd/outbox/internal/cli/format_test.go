package cli

import (
	"io"
	"strings"
	"testing"

	"github.com/txoutbox/outbox"
)

// TestRouteFormat: a config route's format and ce_source keys are put in
// its URL, winning over the URL's own; bad values, in the file or in a
// URL, are usage errors that name them, and so is CloudEvents on a
// destination without a binding.
func TestRouteFormat(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig("r.yaml", []byte(`routes:
  - pattern: "order.*"
    to: https://example.com/hooks?format=cloudevents&a=1#top
    format: cloudevents-structured
    ce_source: /orders service
  - pattern: "billing.*"
    to: kafka://127.0.0.1:1?format=cloudevents
`))
	if err != nil {
		t.Fatal(err)
	}
	e := testEnv(t.Context(), nil, nil, io.Discard, io.Discard)
	specs, err := routeSpecs(&resolver{e: e, set: map[string]bool{}, cfg: cfg}, &relayFlags{})
	if err == nil || !strings.Contains(err.Error(), `config r.yaml: routes[0].ce_source: ce_source="/orders service"`) || exitStatus(err) != ExitUsage {
		t.Fatalf("a source with a space: %v, %v", specs, err)
	}
	cfg.Routes[0].CESource = "/orders"
	specs, err = routeSpecs(&resolver{e: e, set: map[string]bool{}, cfg: cfg}, &relayFlags{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := specs[0].url, "https://example.com/hooks?a=1&format=cloudevents-structured&ce_source=%2Forders#top"; got != want {
		t.Errorf("url %s, want %s", got, want)
	}
	if got, want := specs[1].url, "kafka://127.0.0.1:1?format=cloudevents"; got != want {
		t.Errorf("url %s, want %s", got, want)
	}

	for _, c := range []struct{ yaml, flag, err string }{
		{yaml: "routes:\n  - pattern: x\n    to: https://h\n    format: cloud\n", err: `config r.yaml: routes[0].format: format="cloud": want plain, cloudevents or cloudevents-structured`},
		{flag: "x.*=https://h?format=cloudevent", err: `format="cloudevent": want plain, cloudevents or cloudevents-structured`},
		{flag: "x.*=stdout://?format=cloudevents", err: "stdout has no CloudEvents binding"},
		{flag: "x.*=redis://127.0.0.1:1/0?format=cloudevents", err: "redis has no CloudEvents binding"},
		{flag: "x.*=nats://127.0.0.1:1?format=cloudevents-structured", err: "format=cloudevents-structured is for webhooks"},
		{flag: "x.*=https://h?ce_source=/x", err: "ce_source needs format=cloudevents"},
		{flag: "x.*=https://h?format=cloudevents&format=plain", err: `parameter "format" given more than once`},
	} {
		cfg, err := parseConfig("r.yaml", []byte(c.yaml))
		if err != nil {
			t.Fatal(err)
		}
		f := &relayFlags{}
		if c.flag != "" {
			f.routes = listFlag{c.flag}
		}
		specs, err := routeSpecs(&resolver{e: e, set: map[string]bool{}, cfg: cfg}, f)
		if err == nil {
			var closeAll func()
			closeAll, err = e.openRoutes(specs, &outbox.RelayConfig{}, nil)
			closeAll()
		}
		if err == nil || !strings.Contains(err.Error(), c.err) || exitStatus(err) != ExitUsage || strings.Contains(err.Error(), "\n") {
			t.Errorf("error %v, want a one-line usage error with %q", err, c.err)
		}
	}
}

// TestRelayFormatExitsUsage: `outbox relay` with a bad CloudEvents option
// exits 2 with one line naming it.
func TestRelayFormatExitsUsage(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + t.TempDir() + "/x.db"
	run(t, nil, "relay", "--db", db, "--to", "https://example.com/hooks?format=cloudevents&ce_source=a%20b").failed(t, ExitUsage, `ce_source="a b"`)
	run(t, nil, "relay", "--db", db, "--to", "stdout://?format=cloudevents").failed(t, ExitUsage, "stdout has no CloudEvents binding")
}
