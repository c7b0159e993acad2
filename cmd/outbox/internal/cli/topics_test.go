package cli

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestTopicPatterns: replay, dead list, dead requeue and dead discard take
// a route pattern in --topic and select the topics it matches as routes
// match them ('order.*' one segment, 'order.>' the rest, '*' all); the
// LIKE that narrows the candidates treats '_' and '%' in the pattern as
// plain characters; a plain topic is still compared exactly; a malformed
// pattern, and a pattern with --adopt, are refused with one line (exit 2).
func TestTopicPatterns(t *testing.T) {
	t.Parallel()
	forDialects(t, func(t *testing.T, d store.Dialect) {
		db := testdb.New(t, d)
		vars := dbVars(db)
		ids := map[string]string{}
		for _, topic := range []string{"order.created", "order.paid", "order.eu.created", "orders.created", "order", "billing.failed", "a_b.created", "axb.created"} {
			ids[topic] = enqueueOK(t, vars, "--topic", topic, "--payload", "{}")
		}
		db.Exec(t, "UPDATE outbox_messages SET status = 'sent'")

		replayDry := func(topic string) string {
			t.Helper()
			return run(t, vars, "replay", "--topic", topic, "--dry-run").ok(t).stdout
		}
		for _, c := range []struct {
			topic string
			n     string
		}{
			{"order.*", "2"},
			{"order.>", "3"},
			{"*.created", "4"},
			{"*", "8"},
			{"order.*.created", "1"},
			{"a_b.*", "1"},
			{"nothing.*", "0"},
			{"order", "1"},
			{"order.created", "1"},
		} {
			if got, want := replayDry(c.topic), "would replay "+c.n+" delivered "; !strings.HasPrefix(got, want) {
				t.Errorf("replay --topic %q --dry-run: %q, want %q…", c.topic, got, want)
			}
		}
		if st := status(t, vars); st.Sent != 8 || st.Pending != 0 {
			t.Errorf("a dry run changed the table: %+v", st)
		}
		r := run(t, vars, "replay", "--topic", "order.*", "--key", "none").ok(t)
		if r.stdout != "replayed 0 delivered messages\n" {
			t.Errorf("replay --topic order.* --key none: %q", r.stdout)
		}
		r = run(t, vars, "replay", "--topic", "order.*").ok(t)
		if r.stdout != "replayed 2 delivered messages\n" {
			t.Errorf("replay --topic order.*: %q", r.stdout)
		}
		pending := map[string]bool{}
		rows, err := db.SQL.Query("SELECT topic FROM outbox_messages WHERE status = 'pending'")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var topic string
			if err := rows.Scan(&topic); err != nil {
				t.Fatal(err)
			}
			pending[topic] = true
		}
		rows.Close()
		if len(pending) != 2 || !pending["order.created"] || !pending["order.paid"] {
			t.Errorf("replayed topics %v, want order.created and order.paid", pending)
		}
		es, err := db.Store().Audit(context.Background(), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != 1 || es[0].Count != 2 || !strings.Contains(es[0].Target, `"topic":"order.*"`) {
			t.Errorf("audit log %+v", es)
		}

		// The archive's topics count with --archive.
		db.Exec(t, testdb.Placeholder(d, "UPDATE outbox_messages SET sent_at = "+agoSQL(d)+" WHERE message_id = ?"), ids["billing.failed"])
		if rb, err := db.Store().Retain(context.Background(), 0, 100, store.RetentionPolicy{Sent: time.Hour, Dead: time.Hour, Archive: true}); err != nil || rb.Removed != 1 {
			t.Fatalf("archiving billing.failed: %+v %v", rb, err)
		}
		if got := replayDry("billing.*"); got != "would replay 0 delivered messages\n" {
			t.Errorf("replay --topic billing.* without --archive: %q", got)
		}
		r = run(t, vars, "replay", "--topic", "billing.*", "--archive").ok(t)
		if r.stdout != "replayed 1 delivered message\n" {
			t.Errorf("replay --topic billing.* --archive: %q", r.stdout)
		}

		// Dead messages.
		db.Exec(t, "UPDATE outbox_messages SET status = 'dead', attempts = 3, last_error = 'boom'")
		var list []deadJSON
		run(t, vars, "dead", "list", "--topic", "order.*", "--json").ok(t).decode(t, &list)
		var got []string
		for _, m := range list {
			got = append(got, m.Topic)
		}
		if !slices.Equal(got, []string{"order.created", "order.paid"}) {
			t.Errorf("dead list --topic order.*: %v", got)
		}
		list = nil
		run(t, vars, "dead", "list", "--topic", "order.>", "--limit", "1", "--json").ok(t).decode(t, &list)
		if len(list) != 1 || list[0].MessageID != ids["order.created"] {
			t.Errorf("dead list --topic order.> --limit 1: %v", list)
		}
		if r := run(t, vars, "dead", "list", "--topic", "nothing.>").ok(t); r.stdout != "no dead messages\n" {
			t.Errorf("dead list --topic nothing.>: %q", r.stdout)
		}
		r = run(t, vars, "dead", "requeue", "--topic", "order.>", "--dry-run").ok(t)
		if r.stdout != "would requeue 3 dead messages\n" {
			t.Errorf("dead requeue --topic order.> --dry-run: %q", r.stdout)
		}
		r = run(t, vars, "dead", "discard", "--topic", "*.created").ok(t)
		if r.stdout != "discarded 4 dead messages\n" {
			t.Errorf("dead discard --topic *.created: %q", r.stdout)
		}
		r = run(t, vars, "dead", "requeue", "--topic", "*").ok(t)
		if r.stdout != "requeued 4 dead messages\n" {
			t.Errorf("dead requeue --topic *: %q", r.stdout)
		}
		es, err = db.Store().Audit(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != 1 || es[0].Action != "requeue" || !strings.Contains(es[0].Target, `"topic":"*"`) || strings.Contains(es[0].Target, `"all"`) {
			t.Errorf("audit of requeue --topic *: %+v", es)
		}

		for _, args := range [][]string{
			{"replay", "--topic", "order.>.x"},
			{"dead", "list", "--topic", "order.>.x"},
			{"dead", "requeue", "--topic", "*.>.*"},
			{"dead", "discard", "--topic", "order..*"},
		} {
			run(t, vars, args...).failed(t, ExitUsage, args[0], "--topic", "invalid route pattern")
		}
		run(t, vars, "dead", "list", "--adopt", "laravel", "--topic", "order.*").failed(t, ExitUsage, "--adopt takes one topic")
		run(t, vars, "dead", "requeue", "--adopt", "laravel", "--topic", "order.>").failed(t, ExitUsage, "--adopt takes one topic")
	})
}

// TestTopicLike: the LIKE a pattern narrows candidates with escapes the
// LIKE wildcards and its escape character in literal segments.
func TestTopicLike(t *testing.T) {
	t.Parallel()
	for pattern, want := range map[string]string{
		"*":             "%",
		"order.*":       "order.%",
		"order.>":       "order.%",
		"*.created":     "%.created",
		"a_b.*.c%d!":    "a!_b.%.c!%d!!",
		"order.created": "order.created",
	} {
		if got := store.TopicLike(pattern); got != want {
			t.Errorf("TopicLike(%q) = %q, want %q", pattern, got, want)
		}
	}
}
