package cli

import (
	"strings"
	"testing"
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
