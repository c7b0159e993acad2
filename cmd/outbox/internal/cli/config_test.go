package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig("ok.yaml", []byte(`
database: sqlite://app.db
to: stdout://
routes:
  - {pattern: "order.*", to: "https://example.com/o", destination: orders, retry: {base: 1s}}
relay: {id: r1, batch_size: 10, max_poll: 2s}
retry: {schedule: [10s, 1m]}
log: {level: debug}
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Database != "sqlite://app.db" || len(cfg.Routes) != 1 || cfg.Routes[0].Destination != "orders" ||
		cfg.Relay.BatchSize != "10" || cfg.Retry == nil || len(cfg.Retry.Schedule) != 2 || cfg.Log.Level != "debug" {
		t.Errorf("%+v", cfg)
	}
	if cfg, err := parseConfig("empty.yaml", nil); err != nil || cfg.Database != "" {
		t.Errorf("empty file: %+v, %v", cfg, err)
	}

	bad := []struct{ src, want string }{
		{"databse: x\n", `unknown key "databse" (line 1)`},
		{"routes:\n  - pattern: a\n    to: stdout://\n    secrte: x\n", `unknown key "routes[0].secrte" (line 4)`},
		{"relay:\n  batch_size: [1]\n", "relay.batch_size: want a single value (line 2)"},
		{"routes: stdout://\n", "routes: want a list (line 1)"},
		{"relay: fast\n", "relay: want a mapping (line 1)"},
		{"routes:\n  - to: stdout://\n", "routes[0]: pattern is required"},
	}
	for _, b := range bad {
		_, err := parseConfig("bad.yaml", []byte(b.src))
		if err == nil || exitStatus(err) != ExitUsage || !strings.Contains(err.Error(), b.want) || strings.Contains(err.Error(), "cli.") {
			t.Errorf("%q: error %v, want one containing %q", b.src, err, b.want)
		}
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("to: stdout://\nroutes:\n  - {pattern: a.*, to: stdout://}\nrelay: {lease_ttl: 5s}\n"))
	f.Add([]byte("relay:\n  foo: 1\n"))
	f.Add([]byte("routes: [\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		cfg, err := parseConfig("f.yaml", src)
		if err != nil {
			if exitStatus(err) != ExitUsage {
				t.Errorf("config error is not a usage error: %v", err)
			}
			return
		}
		if cfg == nil {
			t.Fatal("nil config without error")
		}
	})
}

// TestRouteLimits: route options come from the URL of a --route flag or a
// config route (and are taken out of it), and the config's keys win over
// the URL's; bad values are usage errors naming where they are.
func TestRouteLimits(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig("r.yaml", []byte(`routes:
  - pattern: "order.*"
    to: https://example.com/hooks?max_in_flight=8&rate=10/s&a=1
    rate: 200/s
    probe_max: 1m
    max_retry_after: 10m
    max_retry_age: 6h
    max_age: 30m
    claim: reference
`))
	if err != nil {
		t.Fatal(err)
	}
	e := testEnv(t.Context(), nil, nil, io.Discard, io.Discard)
	r := &resolver{e: e, set: map[string]bool{}, cfg: cfg}
	specs, err := routeSpecs(r, &relayFlags{routes: listFlag{"billing.>=nats://h:4222?probe_min=2s&max_retry_after=30s&max_age=90s&claim=inline"}})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%s %+v | %s %+v", specs[0].url, specs[0].limits, specs[1].url, specs[1].limits)
	want := "nats://h:4222 {MaxInFlight:0 Rate:0 ProbeMin:2s ProbeMax:0s MaxRetryAfter:30s MaxRetryAge:0s MaxAge:1m30s Sealed: ClaimCheck:inline} | https://example.com/hooks?a=1 {MaxInFlight:8 Rate:200 ProbeMin:0s ProbeMax:1m0s MaxRetryAfter:10m0s MaxRetryAge:6h0m0s MaxAge:30m0s Sealed: ClaimCheck:reference}"
	if got != want {
		t.Fatalf("specs\n%s\nwant\n%s", got, want)
	}
	for _, c := range []struct{ yaml, flag, err string }{
		{flag: "x.*=https://h?rate=lots", err: `--route "x.*=https://h?rate=lots": destination https://h?rate=lots: rate="lots"`},
		{yaml: "routes:\n  - pattern: x\n    to: stdout://\n    max_in_flight: none\n", err: "config r.yaml: routes[0].max_in_flight: want a whole number"},
		{yaml: "routes:\n  - pattern: x\n    to: stdout://\n    max_retry_age: soon\n", err: "config r.yaml: routes[0].max_retry_age: want a positive duration"},
		{yaml: "routes:\n  - pattern: x\n    to: stdout://\n    max_age: -1m\n", err: "config r.yaml: routes[0].max_age: want a positive duration"},
		{yaml: "routes:\n  - pattern: x\n    to: stdout://\n    claim: later\n", err: "config r.yaml: routes[0].claim: want inline"},
		{yaml: "routes:\n  - pattern: x\n    to: stdout://\n    probe_min: 1m\n    probe_max: 1s\n", err: "routes[0]: probe_min 1m0s is more than probe_max 1s"},
	} {
		cfg, err := parseConfig("r.yaml", []byte(c.yaml))
		if err != nil {
			t.Fatal(err)
		}
		f := &relayFlags{}
		if c.flag != "" {
			f.routes = listFlag{c.flag}
		}
		_, err = routeSpecs(&resolver{e: e, set: map[string]bool{}, cfg: cfg}, f)
		if err == nil || !strings.Contains(err.Error(), c.err) || exitStatus(err) != ExitUsage {
			t.Errorf("error %v, want a usage error with %q", err, c.err)
		}
	}
}

// TestRelayMaxRetryAge: the relay-wide retry budget by age comes from
// --max-retry-age, else relay.max_retry_age; a bad value is a usage error
// naming where it is.
func TestRelayMaxRetryAge(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		yaml string
		args []string
		want time.Duration
		err  string
	}{
		{yaml: "relay: {max_retry_age: 2h}\n", want: 2 * time.Hour},
		{yaml: "relay: {max_retry_age: 2h}\n", args: []string{"--max-retry-age", "30m"}, want: 30 * time.Minute},
		{yaml: "relay: {}\n"},
		{yaml: "relay: {max_retry_age: later}\n", err: "relay.max_retry_age"},
		{yaml: "relay: {}\n", args: []string{"--max-retry-age", "-1s"}, err: "--max-retry-age must not be negative"},
	} {
		cfg, err := parseConfig("r.yaml", []byte(c.yaml))
		if err != nil {
			t.Fatal(err)
		}
		fs := flag.NewFlagSet("relay", flag.ContinueOnError)
		f := newRelayFlags(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		e := testEnv(t.Context(), nil, nil, io.Discard, io.Discard)
		rc, err := resolveRelayConfig(&resolver{e: e, set: setFlags(fs), cfg: cfg}, f)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) || exitStatus(err) != ExitUsage {
				t.Errorf("%s %v: error %v, want a usage error with %q", c.yaml, c.args, err, c.err)
			}
		case err != nil:
			t.Errorf("%s %v: %v", c.yaml, c.args, err)
		case rc.MaxRetryAge != c.want:
			t.Errorf("%s %v: max retry age %s, want %s", c.yaml, c.args, rc.MaxRetryAge, c.want)
		}
	}
}
