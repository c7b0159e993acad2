package cli

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/txoutbox/outbox"
)

// retentionFlags are the relay's retention settings: --retention-sent,
// --retention-dead, --retention-interval, --archive and --no-retention, each falling back to
// its OUTBOX_ variable (OUTBOX_RETENTION_SENT, OUTBOX_RETENTION_DEAD,
// OUTBOX_RETENTION_INTERVAL, OUTBOX_ARCHIVE, OUTBOX_NO_RETENTION) when the
// flag is not given.
type retentionFlags struct {
	sent, dead, interval time.Duration
	archive              bool
	off                  bool

	fs *flag.FlagSet
	// getenv reads the environment; nil means os.Getenv. The relay command
	// sets it to its env's getenv.
	getenv func(string) string
}

// register declares the retention flags on fs.
func (f *retentionFlags) register(fs *flag.FlagSet) {
	f.fs = fs
	fs.DurationVar(&f.sent, "retention-sent", 0, fmt.Sprintf("keep sent and consumed messages this `DURATION` after sending (default $OUTBOX_RETENTION_SENT, else %s)", outbox.DefaultRetentionSent))
	fs.DurationVar(&f.dead, "retention-dead", 0, fmt.Sprintf("keep dead messages this `DURATION` after their last attempt, expired ones after they expired (default $OUTBOX_RETENTION_DEAD, else %s)", outbox.DefaultRetentionDead))
	fs.DurationVar(&f.interval, "retention-interval", 0, fmt.Sprintf("time between two retention sweeps, `DURATION` (default $OUTBOX_RETENTION_INTERVAL, else %s)", outbox.DefaultRetentionInterval))
	fs.BoolVar(&f.archive, "archive", false, "move messages past their retention to outbox_messages_archive instead of deleting them (default $OUTBOX_ARCHIVE)")
	fs.BoolVar(&f.off, "no-retention", false, "keep settled messages; remove nothing (default $OUTBOX_NO_RETENTION)")
}

// apply sets cfg.Retention from the flags and the environment. A bad
// value is a usage error naming the flag or variable.
func (f *retentionFlags) apply(cfg *outbox.RelayConfig) error {
	set := map[string]bool{}
	if f.fs != nil {
		set = setFlags(f.fs)
	}
	getenv := f.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	duration := func(flagName string, flagVal time.Duration, envName string) (time.Duration, string, error) {
		if set[flagName] {
			if flagVal <= 0 {
				return 0, "", usagef("relay: --%s must be positive (to keep messages, use --no-retention)", flagName)
			}
			return flagVal, "--" + flagName, nil
		}
		v := strings.TrimSpace(getenv(envName))
		if v == "" {
			return 0, "", nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return 0, "", usagef("relay: %s: %q is not a positive duration (e.g. 24h, 336h)", envName, v)
		}
		return d, envName, nil
	}
	boolean := func(flagName string, flagVal bool, envName string) (bool, string, error) {
		if set[flagName] {
			return flagVal, "--" + flagName, nil
		}
		v := strings.TrimSpace(getenv(envName))
		if v == "" {
			return false, "", nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, "", usagef("relay: %s: %q is not true or false", envName, v)
		}
		return b, envName, nil
	}
	sent, sentFrom, err := duration("retention-sent", f.sent, "OUTBOX_RETENTION_SENT")
	if err != nil {
		return err
	}
	dead, deadFrom, err := duration("retention-dead", f.dead, "OUTBOX_RETENTION_DEAD")
	if err != nil {
		return err
	}
	interval, intervalFrom, err := duration("retention-interval", f.interval, "OUTBOX_RETENTION_INTERVAL")
	if err != nil {
		return err
	}
	archive, archiveFrom, err := boolean("archive", f.archive, "OUTBOX_ARCHIVE")
	if err != nil {
		return err
	}
	off, offFrom, err := boolean("no-retention", f.off, "OUTBOX_NO_RETENTION")
	if err != nil {
		return err
	}
	if off {
		for _, from := range []string{sentFrom, deadFrom, intervalFrom} {
			if from != "" {
				return usagef("relay: %s conflicts with %s: retention is off", from, offFrom)
			}
		}
		if archive {
			return usagef("relay: %s conflicts with %s: retention is off", archiveFrom, offFrom)
		}
		cfg.Retention = &outbox.RetentionConfig{Disabled: true}
		return nil
	}
	if sent == 0 && dead == 0 && interval == 0 && !archive {
		return nil // the defaults, or whatever the caller set
	}
	rc := &outbox.RetentionConfig{}
	if cfg.Retention != nil {
		*rc = *cfg.Retention
	}
	if sent > 0 {
		rc.Sent = sent
	}
	if dead > 0 {
		rc.Dead = dead
	}
	if interval > 0 {
		rc.Interval = interval
	}
	if archive {
		rc.Archive = true
	}
	cfg.Retention = rc
	return nil
}
