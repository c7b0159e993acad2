package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/seal"
)

// deadJSON is one element of 'outbox dead list --json'.
type deadJSON struct {
	MessageID   string    `json:"message_id"`
	Topic       string    `json:"topic"`
	BusinessKey string    `json:"business_key"`
	Attempts    int       `json:"attempts"`
	MaxAttempts int       `json:"max_attempts"`
	LastError   string    `json:"last_error"`
	CreatedAt   time.Time `json:"created_at"`
	DiedAt      time.Time `json:"died_at"`
	// Payload (as stored) and Headers come with --with-payload only.
	Payload *string         `json:"payload,omitempty"`
	Headers json.RawMessage `json:"headers,omitempty"`
	// ClaimCheck, with --with-payload, describes a payload kept in a blob
	// store; Payload then describes it instead of the row's empty one.
	ClaimCheck *claimJSON `json:"claim_check,omitempty"`
}

// claimJSON is the reference of a claim-checked payload (package
// claimcheck): ref SCHEME:KEY, the blob's size and SHA-256, or the error
// of a malformed reference (with ref as stored).
type claimJSON struct {
	Ref    string `json:"ref"`
	Size   *int64 `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	Error  string `json:"error,omitempty"`
}

// deadPayload is the payload 'dead list --with-payload' prints: for a
// claim-checked message "claim check: SCHEME:KEY, N bytes" (and its seal
// key when the blob is sealed) with the reference, never the blob; for a
// sealed one "sealed, key K"; else the payload as stored.
func deadPayload(payload, headers string) (*string, *claimJSON) {
	h := map[string]string{}
	if json.Unmarshal([]byte(headers), &h) != nil {
		return shownPayload(payload, headers), nil
	}
	ref, ok, err := claimcheck.ParseHeaders(h)
	if !ok {
		return shownPayload(payload, headers), nil
	}
	var shown string
	var c *claimJSON
	if err != nil {
		shown, c = "claim check: invalid reference", &claimJSON{Ref: h[claimcheck.HeaderRef], Error: err.Error()}
	} else {
		size := ref.Size
		shown, c = fmt.Sprintf("claim check: %s, %d bytes", ref, ref.Size), &claimJSON{Ref: ref.String(), Size: &size, SHA256: ref.SHA256}
	}
	if _, keyID, sealed := seal.Sealed(h); sealed {
		shown += " (" + seal.Describe(keyID) + ")"
	}
	return &shown, c
}

// diedAt is when m died: available_at, which the relay's settle sets to
// the time of death (schema version 17; for a message that died before,
// when its last attempt fell due), or created_at when that is later.
func diedAt(m store.Message) time.Time {
	if m.AvailableAt.After(m.CreatedAt) {
		return m.AvailableAt.UTC()
	}
	return m.CreatedAt.UTC()
}

// defaultDeadLimit is how many dead messages 'dead list' shows by default.
const defaultDeadLimit = 100

func deadListCommand() *command {
	return &command{
		name:     "dead list",
		synopsis: "[--topic T] [--limit N] [--json [--with-payload]]",
		summary:  "list dead messages with their last error",
		about: `Lists dead messages, oldest first, with their last error, when they were
created and when they died. --json prints an array of objects with
"message_id", "topic", "business_key", "attempts", "max_attempts",
"last_error", "created_at" and "died_at";
--with-payload adds each message's "payload" (as stored) and "headers"
(an object); a sealed payload shows as "sealed, key K", and one kept in a
blob store as "claim check: SCHEME:KEY, N bytes" with "claim_check"
{"ref", "size", "sha256"}. --expired lists the expired messages instead: those whose
expires_at came before they were delivered ("died_at" is when they
expired).

` + topicAbout + `

` + adoptAbout + ` Dead rows are the table's
own: its dead status, or failed with its retries used up.`,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			var df dbFlags
			df.register(fs)
			topic := fs.String("topic", "", "only messages of `TOPIC` (or matching a route pattern: order.*, order.>)")
			limit := fs.Int("limit", defaultDeadLimit, "show at most `N` messages")
			asJSON := fs.Bool("json", false, "print JSON")
			withPayload := fs.Bool("with-payload", false, "with --json, include each message's payload and headers")
			expired := fs.Bool("expired", false, "list the expired messages (their expires_at came before delivery) instead of the dead ones")
			adoptSpec := fs.String("adopt", "", adoptUsage)
			return func(e *env, pos []string) error {
				if err := noArgs("dead list", pos); err != nil {
					return err
				}
				status := store.StatusDead
				if *expired {
					if *adoptSpec != "" {
						return usagef("dead list: an adopted table has no expired messages")
					}
					status = store.StatusExpired
				}
				if *withPayload && !*asJSON {
					return usagef("dead list: --with-payload needs --json")
				}
				if *limit < 1 {
					return usagef("dead list: --limit must be at least 1")
				}
				if err := checkTopicFlag("dead list", *topic); err != nil {
					return err
				}
				if *adoptSpec != "" {
					if err := noPatternWithAdopt("dead list", *topic); err != nil {
						return err
					}
				}
				db, _, err := e.openDB(df)
				if err != nil {
					return err
				}
				defer db.Close()
				// One more than asked tells whether the list was cut.
				f := store.Filter{Status: status, Topic: *topic, Limit: *limit + 1}
				if isTopicPattern(f.Topic) && *adoptSpec == "" {
					f.Topic = ""
					if f.Topics, err = matchTopics(e.ctx, "dead list", db.Backend().Store, store.ActionDiscard, store.BulkFilter{Status: status}, *topic); err != nil {
						return e.schemaHint(db, "dead list", err)
					}
				}
				msgs, err := e.listDead(db, *adoptSpec, f)
				if err != nil {
					return e.schemaHint(db, "dead list", err)
				}
				more := len(msgs) > *limit
				if more {
					msgs = msgs[:*limit]
				}
				if *asJSON {
					out := make([]deadJSON, 0, len(msgs))
					for _, m := range msgs {
						d := deadJSON{
							MessageID: m.MessageID, Topic: m.Topic, BusinessKey: m.Key,
							Attempts: m.Attempts, MaxAttempts: m.MaxAttempts,
							LastError: m.LastError, CreatedAt: m.CreatedAt.UTC(), DiedAt: diedAt(m),
						}
						if *withPayload {
							d.Payload, d.ClaimCheck = deadPayload(m.Payload, m.Headers)
							d.Headers = store.HeadersJSON(m.Headers)
						}
						out = append(out, d)
					}
					enc := json.NewEncoder(e.stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(out)
				}
				e.printDead(msgs, more, status)
				return nil
			}
		},
	}
}

func (e *env) printDead(msgs []store.Message, more bool, status string) {
	if len(msgs) == 0 {
		fmt.Fprintf(e.stdout, "no %s messages\n", status)
		return
	}
	died := "DIED"
	if status == store.StatusExpired {
		died = "EXPIRED"
	}
	t := newTable(e.stdout, "MESSAGE ID", "TOPIC", "KEY", "ATTEMPTS", "CREATED", died, "LAST ERROR")
	const stamp = "2006-01-02 15:04:05Z"
	for _, m := range msgs {
		key := m.Key
		if key == "" {
			key = "-"
		}
		t.row(m.MessageID, m.Topic, truncate(key, 40), fmt.Sprintf("%d/%d", m.Attempts, m.MaxAttempts),
			m.CreatedAt.UTC().Format(stamp), diedAt(m).Format(stamp), truncate(m.LastError, 100))
	}
	t.flush()
	if more {
		fmt.Fprintf(e.stdout, "(first %d shown; raise --limit to see more)\n", len(msgs))
	}
}

// truncate makes s one line of at most n characters.
func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// deadAction is requeue or discard.
type deadAction struct {
	name    string // "requeue"
	past    string // "requeued"
	summary string
	about   string
	action  store.BulkAction
}

func deadRequeueCommand() *command {
	return deadAction{
		name: "requeue", past: "requeued",
		summary: "move dead messages back to pending, attempts reset",
		about: `Moves dead messages back to pending with their attempts reset; the relay
delivers them again. Select them with --id (repeatable), --topic or --all.
--expired requeues expired messages instead (their expires_at came
before delivery), without their expiry.

` + topicAbout + bulkAbout + `

` + adoptAbout + ` Requeued rows get the table's
pending status, their retry counter at 0 and no next-retry time; --id
takes the ids 'dead list --adopt' shows. No audit row is written for an
adopted table.`,
		action: store.ActionRequeue,
	}.command()
}

func deadDiscardCommand() *command {
	return deadAction{
		name: "discard", past: "discarded",
		summary: "delete dead messages",
		about: `Deletes dead messages for good. Select them with --id (repeatable),
--topic or --all. --expired deletes expired messages instead.

` + topicAbout + bulkAbout,
		action: store.ActionDiscard,
	}.command()
}

func (a deadAction) command() *command {
	full := "dead " + a.name
	return &command{
		name:     full,
		synopsis: "(--id ID … | --topic T | --all) [--dry-run] [--batch-size N]",
		summary:  a.summary,
		about:    a.about,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			var df dbFlags
			df.register(fs)
			var ids listFlag
			fs.Var(&ids, "id", "the dead message with this message `ID` (repeatable)")
			topic := fs.String("topic", "", "every dead message of `TOPIC` (or matching a route pattern: order.*, order.>)")
			all := fs.Bool("all", false, "every dead message")
			dryRun := fs.Bool("dry-run", false, "only print how many messages would change")
			batch := fs.Int("batch-size", store.DefaultBulkBatch, "change at most `N` rows per statement (each its own transaction)")
			expired := fs.Bool("expired", false, "act on expired messages (their expires_at came before delivery) instead of dead ones")
			adoptSpec := fs.String("adopt", "", adoptUsage)
			return func(e *env, pos []string) error {
				if err := noArgs(full, pos); err != nil {
					return err
				}
				status := store.StatusDead
				if *expired {
					if *adoptSpec != "" {
						return usagef("%s: an adopted table has no expired messages", full)
					}
					status = store.StatusExpired
				}
				set := setFlags(fs)
				kinds := 0
				for _, k := range []string{"id", "topic", "all"} {
					if set[k] {
						kinds++
					}
				}
				if kinds != 1 {
					return usagef("%s: give exactly one of --id, --topic or --all", full)
				}
				if set["all"] && !*all {
					return usagef("%s: --all=false selects nothing; give --id, --topic or --all", full)
				}
				if set["topic"] && *topic == "" {
					return usagef("%s: --topic must not be empty", full)
				}
				if err := checkTopicFlag(full, *topic); err != nil {
					return err
				}
				if *batch < 1 {
					return usagef("%s: --batch-size must be at least 1", full)
				}
				if *adoptSpec != "" {
					if err := noPatternWithAdopt(full, *topic); err != nil {
						return err
					}
					return e.adoptedBulk(df, *adoptSpec, full, a.name, a.past, a.action, *topic, ids, *dryRun)
				}
				f := store.BulkFilter{Topic: *topic, Status: status}
				var err error
				if f.MessageIDs, err = parseIDs(full, ids); err != nil {
					return err
				}
				db, _, err := e.openDB(df)
				if err != nil {
					return err
				}
				defer db.Close()
				st, err := asRelaysSee(e.ctx, db.Backend().Store)
				if err != nil {
					return e.schemaHint(db, full, err)
				}
				if isTopicPattern(f.Topic) {
					f.Topic = ""
					if f.Topics, err = matchTopics(e.ctx, full, st, a.action, f, *topic); err != nil {
						return e.schemaHint(db, full, err)
					}
				}
				matched, err := st.CountBulk(e.ctx, a.action, f)
				if err != nil {
					return e.schemaHint(db, full, err)
				}
				n := matched
				if !*dryRun && matched > 0 {
					target := auditFilter{Status: status, Topic: *topic, IDs: f.MessageIDs, All: *topic == "" && len(f.MessageIDs) == 0}
					n, err = e.applyBulk(db.Backend(), bulkRun{full: full, past: a.past, action: a.action, f: f, target: target, matched: matched, batch: *batch})
					if err != nil {
						return e.schemaHint(db, full, err)
					}
				}
				return e.reportBulk(full, a.name, a.past, status, f.MessageIDs, n, *dryRun)
			}
		},
	}
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

const bulkAbout = `

--dry-run prints how many messages would change and changes nothing.
Large selections are changed --batch-size rows at a time, each batch its own
short transaction, with progress on stderr. Each run adds a row (actor
"cli") to the audit log the admin API shows.`

// parseIDs checks --id values and returns them lowercase, once each.
func parseIDs(full string, ids []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, id := range ids {
		u, err := uuid.Parse(id)
		if err != nil || len(id) != 36 {
			return nil, usagef("%s: --id %q is not a message id (a UUID like 0190a6e4-…)", full, id)
		}
		if s := u.String(); !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out, nil
}

// reportBulk prints the outcome line of a bulk command ("requeued 3 dead
// messages"), or fails when explicit ids matched nothing. what names the
// messages selected ("dead", "delivered").
func (e *env) reportBulk(full, verb, past, what string, ids []string, n int64, dryRun bool) error {
	if len(ids) > 0 && n == 0 {
		noun := "id"
		if len(ids) > 1 {
			noun = "ids"
		}
		return fmt.Errorf("%s: no %s message with %s %s", full, what, noun, strings.Join(ids, ", "))
	}
	if dryRun {
		fmt.Fprintf(e.stdout, "would %s %d %s %s", verb, n, what, plural(n, "message", "messages"))
	} else {
		fmt.Fprintf(e.stdout, "%s %d %s %s", past, n, what, plural(n, "message", "messages"))
	}
	if len(ids) > 0 && int(n) < len(ids) {
		fmt.Fprintf(e.stdout, " (%d of %d ids matched a %s message)", n, len(ids), what)
	}
	fmt.Fprintln(e.stdout)
	return nil
}

// bulkRun is one bulk change of a command: what it does, to what, and
// how it is recorded.
type bulkRun struct {
	full    string // the command, "dead requeue"
	past    string // "requeued"
	action  store.BulkAction
	f       store.BulkFilter
	target  auditFilter // the selection as the audit log records it
	matched int64       // rows counted beforehand, for progress
	batch   int
}

// applyBulk runs a bulk change, reporting progress on stderr when it
// takes more than one batch, and records it in the audit log.
func (e *env) applyBulk(b *store.Backend, r bulkRun) (int64, error) {
	st, err := asRelaysSee(e.ctx, b.Store)
	if err != nil {
		return 0, err
	}
	opts := store.BulkOptions{BatchSize: r.batch}
	if r.matched > int64(r.batch) {
		opts.Progress = func(done int64) {
			fmt.Fprintf(e.stderr, "%s: %d of %d\n", r.full, done, r.matched)
		}
	}
	n, err := st.Bulk(e.ctx, r.action, r.f, opts)
	if n > 0 && (r.action == store.ActionRequeue || r.action == store.ActionReplay) && b.Notify != nil {
		// Relays poll anyway; on PostgreSQL they can hear it at once.
		_ = b.Notify(context.WithoutCancel(e.ctx))
	}
	if n > 0 {
		target, _ := json.Marshal(r.target)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(e.ctx), 10*time.Second)
		defer cancel()
		if aerr := st.InsertAudit(ctx, store.AuditEntry{Actor: "cli", Action: string(r.action), Target: string(target), Count: n}); aerr != nil {
			fmt.Fprintf(e.stderr, "outbox: warning: %s: the audit row could not be written (run 'outbox migrate'): %s\n", r.full, errorLine(aerr))
		}
	}
	if err != nil {
		return n, fmt.Errorf("stopped after %s %d: %w", r.past, n, err)
	}
	return n, nil
}

// auditFilter is a command line selection as the audit log records it,
// in the admin API's filter form.
type auditFilter struct {
	Status  string   `json:"status"`
	Topic   string   `json:"topic,omitempty"`
	Key     string   `json:"key,omitempty"`
	IDs     []string `json:"ids,omitempty"`
	Since   string   `json:"since,omitempty"`
	Until   string   `json:"until,omitempty"`
	All     bool     `json:"all,omitempty"`
	Archive bool     `json:"archive,omitempty"`
}
