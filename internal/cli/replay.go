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
			var df dbFlags
			df.register(fs)
			var ids listFlag
			fs.Var(&ids, "id", "the message with this message `ID` (repeatable)")
			topic := fs.String("topic", "", "messages of `TOPIC` (or matching a route pattern: order.*, order.>)")
			key := fs.String("key", "", "messages with this business `KEY`")
			since := fs.String("since", "", "messages created at or after `TIME`")
			until := fs.String("until", "", "messages created before `TIME`")
			all := fs.Bool("all", false, "every sent or consumed message")
			status := fs.String("status", "", "only messages in `STATUS`: sent or consumed (default both)")
			archive := fs.Bool("archive", false, "also replay from outbox_messages_archive")
			dryRun := fs.Bool("dry-run", false, "only print how many messages would change")
			yes := fs.Bool("yes", false, "replay even more than --max messages")
			most := fs.Int("max", store.DefaultReplayMax, "refuse to replay more than `N` messages without --yes")
			batch := fs.Int("batch-size", store.DefaultBulkBatch, "change at most `N` rows per statement (each its own transaction)")
			keysFile := keysFileFlag(fs)
			return func(e *env, pos []string) error {
				if err := noArgs(full, pos); err != nil {
					return err
				}
				set := setFlags(fs)
				f := store.BulkFilter{Topic: *topic, Key: *key, Status: *status, Archive: *archive}
				target := auditFilter{Status: *status, Topic: *topic, Key: *key, All: *all, Archive: *archive}
				var err error
				if f.MessageIDs, err = parseIDs(full, ids); err != nil {
					return err
				}
				target.IDs = f.MessageIDs
				now := time.Now()
				if f.Since, err = parseSince(full, "since", *since, now); err != nil {
					return err
				}
				if f.Until, err = parseSince(full, "until", *until, now); err != nil {
					return err
				}
				target.Since, target.Until = auditTime(f.Since), auditTime(f.Until)
				if err := checkReplay(full, set, f, *all, *most, *batch); err != nil {
					return err
				}
				db, _, err := e.openDB(df)
				if err != nil {
					return err
				}
				defer db.Close()
				if isTopicPattern(f.Topic) {
					pattern := f.Topic
					f.Topic = ""
					if f.Topics, err = matchTopics(e.ctx, full, db.Backend().Store, store.ActionReplay, f, pattern); err != nil {
						return e.schemaHint(db, full, err)
					}
				}
				skipped, err := e.skipErased(db.Backend().Store, full, *keysFile, &f)
				if err != nil {
					return err
				}
				matched, err := db.Backend().Store.CountBulk(e.ctx, store.ActionReplay, f)
				if err != nil {
					return e.schemaHint(db, full, err)
				}
				if !*dryRun && !*yes && matched > int64(*most) {
					return usagef("%s: would replay %d messages, more than --max %d; add --yes to replay them all (or --dry-run to only count)", full, matched, *most)
				}
				n := matched
				if !*dryRun && matched > 0 {
					n, err = e.applyBulk(db.Backend(), bulkRun{full: full, past: "replayed", action: store.ActionReplay, f: f, target: target, matched: matched, batch: *batch})
					if err != nil {
						return e.schemaHint(db, full, err)
					}
				}
				if skipped > 0 {
					fmt.Fprintf(e.stdout, "skipped %d %s sealed under erased keys\n", skipped, plural(skipped, "message", "messages"))
				}
				return e.reportBulk(full, "replay", "replayed", "delivered", f.MessageIDs, n, *dryRun)
			}
		},
	}
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
