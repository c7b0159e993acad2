package cli

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
)

func TestRetentionFlags(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want *outbox.RetentionConfig // nil: left as the caller had it
		err  string
	}{
		{name: "defaults", want: nil},
		{name: "flags", args: []string{"--retention-sent", "2h", "--retention-dead", "72h", "--archive"},
			want: &outbox.RetentionConfig{Sent: 2 * time.Hour, Dead: 72 * time.Hour, Archive: true}},
		{name: "env", env: map[string]string{"OUTBOX_RETENTION_SENT": "30m", "OUTBOX_ARCHIVE": "true"},
			want: &outbox.RetentionConfig{Sent: 30 * time.Minute, Archive: true}},
		{name: "flag beats env", args: []string{"--retention-dead=1h"}, env: map[string]string{"OUTBOX_RETENTION_DEAD": "5h"},
			want: &outbox.RetentionConfig{Dead: time.Hour}},
		{name: "off", args: []string{"--no-retention"}, want: &outbox.RetentionConfig{Disabled: true}},
		{name: "off by env", env: map[string]string{"OUTBOX_NO_RETENTION": "1"}, want: &outbox.RetentionConfig{Disabled: true}},
		{name: "zero", args: []string{"--retention-sent", "0s"}, err: "--retention-sent must be positive"},
		{name: "negative", args: []string{"--retention-dead", "-1h"}, err: "--retention-dead must be positive"},
		{name: "bad env", env: map[string]string{"OUTBOX_RETENTION_SENT": "a day"}, err: `OUTBOX_RETENTION_SENT: "a day" is not a positive duration`},
		{name: "bad bool", env: map[string]string{"OUTBOX_ARCHIVE": "maybe"}, err: `OUTBOX_ARCHIVE: "maybe" is not true or false`},
		{name: "conflict", args: []string{"--no-retention", "--retention-sent", "1h"}, err: "--retention-sent conflicts with --no-retention"},
		{name: "conflict archive", args: []string{"--archive"}, env: map[string]string{"OUTBOX_NO_RETENTION": "true"}, err: "--archive conflicts with OUTBOX_NO_RETENTION"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := flag.NewFlagSet("relay", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f := &retentionFlags{getenv: func(k string) string { return c.env[k] }}
			f.register(fs)
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			cfg := &outbox.RelayConfig{}
			err := f.apply(cfg)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("error %v, want one line containing %q", err, c.err)
				}
				if exitStatus(err) != ExitUsage {
					t.Errorf("exit status %d for %v, want %d", exitStatus(err), err, ExitUsage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case c.want == nil && cfg.Retention != nil:
				t.Fatalf("retention set to %+v, want untouched", *cfg.Retention)
			case c.want != nil && (cfg.Retention == nil || !sameRetention(*cfg.Retention, *c.want)):
				t.Fatalf("retention %+v, want %+v", cfg.Retention, *c.want)
			}
		})
	}
}

// TestRetentionFlagsKeepCallerSettings: flags change only what they name.
func TestRetentionFlagsKeepCallerSettings(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	f := &retentionFlags{getenv: func(string) string { return "" }}
	f.register(fs)
	if err := fs.Parse([]string{"--archive"}); err != nil {
		t.Fatal(err)
	}
	cfg := &outbox.RelayConfig{Retention: &outbox.RetentionConfig{Dead: time.Hour, BatchSize: 10}}
	if err := f.apply(cfg); err != nil {
		t.Fatal(err)
	}
	if want := (outbox.RetentionConfig{Dead: time.Hour, BatchSize: 10, Archive: true}); !sameRetention(*cfg.Retention, want) {
		t.Fatalf("retention %+v, want %+v", *cfg.Retention, want)
	}
}

func sameRetention(a, b outbox.RetentionConfig) bool {
	return a.Sent == b.Sent && a.Dead == b.Dead && a.Archive == b.Archive && a.BatchSize == b.BatchSize &&
		a.Interval == b.Interval && a.Disabled == b.Disabled
}
