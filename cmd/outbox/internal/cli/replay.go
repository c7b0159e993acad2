package cli

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/txoutbox/outbox/internal/store"
)

func replayCommand() *command {
	const full = "replay"
	return &command{
		name:     full,
		synopsis: "(--id ID … | --topic T | --key K | --since TIME | --until TIME | --all) [--status sent|consumed] [--archive] [--keys FILE] [--dry-run] [--yes] [--max N] [--batch-size N]",
		summary:  "deliver sent or consumed messages again, with the same message ids",
		about: `Puts messages that were already delivered (sent or consumed) back to
pending, attempts reset, so the relay delivers them again: for a consumer
that lost its data, or a new consumer that needs the history. Messages keep
their message ids, so consumers that dedupe (the inbox) skip what they have
already applied; a consumer that lost its data clears its inbox rows first.

Select with --id (repeatable), --topic, --key, --since and --until
(created_at; an RFC 3339 time such as 2026-01-31T12:00:00Z, a date, or a
duration meaning that long ago such as 24h); the filters combine. --all
selects every delivered message. --status narrows to sent or consumed.
--archive also replays matching messages that retention moved into
outbox_messages_archive (they move back into outbox_messages); messages
retention deleted are gone and cannot be replayed.

With a key file (--keys FILE, else OUTBOX_KEYS_FILE), messages sealed under
a key erased from it are skipped, and counted: they can no longer be
opened (docs/security.md).

` + topicAbout + `

More than --max messages are refused unless --yes is given.` + bulkAbout,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			var f replayFlags
			f.register(fs)
			return func(e *env, pos []string) error {
				if err := noArgs(full, pos); err != nil {
					return err
				}
				sel, target, err := f.selection(full, setFlags(fs))
				if err != nil {
					return err
				}
				return e.replay(full, &f, sel, target)
			}
		},
	}
}

// replayFlags are replay's flags.
type replayFlags struct {
	db                        dbFlags
	ids                       listFlag
	topic, key, since, until  string
	status                    string
	all, archive, dryRun, yes bool
	most, batch               int
	keysFile                  *string
}

func (f *replayFlags) register(fs *flag.FlagSet) {
	f.db.register(fs)
	fs.Var(&f.ids, "id", "the message with this message `ID` (repeatable)")
	fs.StringVar(&f.topic, "topic", "", "messages of `TOPIC` (or matching a route pattern: order.*, order.>)")
	fs.StringVar(&f.key, "key", "", "messages with this business `KEY`")
	fs.StringVar(&f.since, "since", "", "messages created at or after `TIME`")
	fs.StringVar(&f.until, "until", "", "messages created before `TIME`")
	fs.BoolVar(&f.all, "all", false, "every sent or consumed message")
	fs.StringVar(&f.status, "status", "", "only messages in `STATUS`: sent or consumed (default both)")
	fs.BoolVar(&f.archive, "archive", false, "also replay from outbox_messages_archive")
	fs.BoolVar(&f.dryRun, "dry-run", false, "only print how many messages would change")
	fs.BoolVar(&f.yes, "yes", false, "replay even more than --max messages")
	fs.IntVar(&f.most, "max", store.DefaultReplayMax, "refuse to replay more than `N` messages without --yes")
	fs.IntVar(&f.batch, "batch-size", store.DefaultBulkBatch, "change at most `N` rows per statement (each its own transaction)")
	f.keysFile = keysFileFlag(fs)
}

// selection is the messages the flags select (set: the flags given), as
// the store's filter and as the audit log records them, once checked.
func (f *replayFlags) selection(full string, set map[string]bool) (store.BulkFilter, auditFilter, error) {
	sel := store.BulkFilter{Topic: f.topic, Key: f.key, Status: f.status, Archive: f.archive}
	target := auditFilter{Status: f.status, Topic: f.topic, Key: f.key, All: f.all, Archive: f.archive}
	var err error
	if sel.MessageIDs, err = parseIDs(full, f.ids); err != nil {
		return sel, target, err
	}
	target.IDs = sel.MessageIDs
	now := time.Now()
	if sel.Since, err = parseSince(full, "since", f.since, now); err != nil {
		return sel, target, err
	}
	if sel.Until, err = parseSince(full, "until", f.until, now); err != nil {
		return sel, target, err
	}
	target.Since, target.Until = auditTime(sel.Since), auditTime(sel.Until)
	if err := checkReplay(full, set, sel, f.all, f.most, f.batch); err != nil {
		return sel, target, err
	}
	return sel, target, nil
}

// replay puts the messages sel selects back to pending, recording target
// in the audit log, or with --dry-run only counts them; messages sealed
// under erased keys are skipped and counted.
func (e *env) replay(full string, f *replayFlags, sel store.BulkFilter, target auditFilter) error {
	db, _, err := e.openDB(f.db)
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := asRelaysSee(e.ctx, db.Backend().Store)
	if err != nil {
		return e.schemaHint(db, full, err)
	}
	if isTopicPattern(sel.Topic) {
		pattern := sel.Topic
		sel.Topic = ""
		if sel.Topics, err = matchTopics(e.ctx, full, st, store.ActionReplay, sel, pattern); err != nil {
			return e.schemaHint(db, full, err)
		}
	}
	skipped, err := e.skipErased(st, full, *f.keysFile, &sel)
	if err != nil {
		return err
	}
	matched, err := st.CountBulk(e.ctx, store.ActionReplay, sel)
	if err != nil {
		return e.schemaHint(db, full, err)
	}
	if !f.dryRun && !f.yes && matched > int64(f.most) {
		return usagef("%s: would replay %d messages, more than --max %d; add --yes to replay them all (or --dry-run to only count)", full, matched, f.most)
	}
	n := matched
	if !f.dryRun && matched > 0 {
		n, err = e.applyBulk(db.Backend(), bulkRun{full: full, past: "replayed", action: store.ActionReplay, f: sel, target: target, matched: matched, batch: f.batch})
		if err != nil {
			return e.schemaHint(db, full, err)
		}
	}
	if skipped > 0 {
		fmt.Fprintf(e.stdout, "skipped %d %s sealed under erased keys\n", skipped, plural(skipped, "message", "messages"))
	}
	return e.reportBulk(full, "replay", "replayed", "delivered", sel.MessageIDs, n, f.dryRun)
}

// checkReplay rejects a replay selection that is empty, contradictory or
// out of range.
func checkReplay(full string, set map[string]bool, f store.BulkFilter, all bool, most, batch int) error {
	scoped := len(f.MessageIDs) > 0 || set["topic"] || set["key"] || !f.Since.IsZero() || !f.Until.IsZero()
	switch {
	case set["topic"] && f.Topic == "", set["key"] && f.Key == "":
		return usagef("%s: --topic and --key must not be empty", full)
	case checkTopicFlag(full, f.Topic) != nil:
		return checkTopicFlag(full, f.Topic)
	case set["all"] && !all:
		return usagef("%s: --all=false selects nothing; give a filter or --all", full)
	case !scoped && !all:
		return usagef("%s: give a filter (--id, --topic, --key, --since, --until) or --all", full)
	case scoped && all:
		return usagef("%s: --all and a filter exclude each other", full)
	case f.Status != "" && f.Status != store.StatusSent && f.Status != store.StatusConsumed:
		return usagef("%s: --status must be sent or consumed, not %q", full, f.Status)
	case !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until):
		return usagef("%s: --since must be before --until", full)
	case most < 0:
		return usagef("%s: --max must not be negative", full)
	case batch < 1:
		return usagef("%s: --batch-size must be at least 1", full)
	}
	return nil
}

// parseSince reads a --since/--until value: an RFC 3339 time, a date
// (UTC midnight) or a duration before now. "" is the zero time.
func parseSince(full, flagName, v string, now time.Time) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, usagef("%s: --%s %q is not a time (2026-01-31T12:00:00Z, 2026-01-31, or a duration ago such as 24h)", full, flagName, v)
}

// auditTime is t as the audit log records it, "" for the zero time.
func auditTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
