package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// hoursAgo is the dialect's expression for the database's now minus h hours.
func hoursAgo(d store.Dialect, h int) string {
	switch d {
	case store.Postgres:
		return fmt.Sprintf("now() - interval '%d hours'", h)
	case store.MySQL:
		return fmt.Sprintf("NOW(6) - INTERVAL %d HOUR", h)
	default:
		return fmt.Sprintf("strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', '%+d hours')", -h)
	}
}

// setStatus sets the status of the messages with the given ids.
func setStatus(t *testing.T, db *testdb.DB, status string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		sent := ""
		if status == store.StatusSent {
			sent = ", sent_at = created_at"
		}
		db.Exec(t, testdb.Placeholder(db.Dialect, "UPDATE outbox_messages SET status = ?, attempts = 3, last_error = 'boom'"+sent+" WHERE message_id = ?"), status, id)
	}
}

func messageIDs(rs []store.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.MessageID
	}
	return out
}

func TestSearch(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		ctx := context.Background()
		var in []store.NewMessage
		for i := range 12 {
			m := newMsg([]string{"order.created", "order.paid"}[i%2], fmt.Sprintf("k%d", i%3))
			m.Payload = strings.Repeat("é", 150) + strings.Repeat("x", 150) + fmt.Sprint(i)
			in = append(in, m)
		}
		insert(t, db, st, in...)
		ids := make([]string, len(in))
		for i, m := range in {
			ids[i] = m.MessageID
		}
		setStatus(t, db, store.StatusDead, ids[0], ids[3], ids[6])
		setStatus(t, db, store.StatusSent, ids[1])
		for _, id := range ids[:4] {
			db.Exec(t, testdb.Placeholder(db.Dialect, "UPDATE outbox_messages SET created_at = "+hoursAgo(db.Dialect, 3)+" WHERE message_id = ?"), id)
		}

		all, err := st.Search(ctx, store.Search{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Clone(ids)
		slices.Reverse(want)
		if got := messageIDs(all); !slices.Equal(got, want) {
			t.Fatalf("search all: %v, want newest first %v", got, want)
		}
		r := all[len(all)-1]
		if r.Payload != strings.Repeat("é", 150)+strings.Repeat("x", 50) || r.Headers != "" {
			t.Errorf("preview %q (%d chars), headers %q", r.Payload, len([]rune(r.Payload)), r.Headers)
		}
		if r.Status != "dead" || r.Attempts != 3 || r.LastError == nil || *r.LastError != "boom" || r.Key == nil || *r.Key != "k0" || r.SentAt != nil || r.ConsumedAt != nil {
			t.Errorf("dead record: %+v", r)
		}

		cases := []struct {
			name string
			s    store.Search
			want []string
		}{
			{"status", store.Search{Status: "dead"}, []string{ids[6], ids[3], ids[0]}},
			{"status and topic", store.Search{Status: "dead", Topic: "order.paid"}, []string{ids[3]}},
			{"key", store.Search{Key: "k1"}, []string{ids[10], ids[7], ids[4], ids[1]}},
			{"message id, upper case", store.Search{MessageID: strings.ToUpper(ids[5])}, []string{ids[5]}},
			{"not a message id", store.Search{MessageID: "nope"}, nil},
			{"since", store.Search{Since: time.Now().Add(-time.Hour)}, want[:8]},
			{"until", store.Search{Until: time.Now().Add(-time.Hour)}, want[8:]},
			{"since and until", store.Search{Since: time.Now().Add(-4 * time.Hour), Until: time.Now().Add(-2 * time.Hour), Topic: "order.created"}, []string{ids[2], ids[0]}},
			{"before", store.Search{Before: all[2].ID, Limit: 3}, want[3:6]},
			{"bounds beyond 1970 and 2038", store.Search{Since: time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)}, want},
			{"since far ahead", store.Search{Since: time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)}, nil},
			{"until long ago", store.Search{Until: time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)}, nil},
		}
		for _, c := range cases {
			got, err := st.Search(ctx, c.s)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if !slices.Equal(messageIDs(got), c.want) {
				t.Errorf("%s: %v, want %v", c.name, messageIDs(got), c.want)
			}
		}
		// Paging walks every row once.
		var paged []string
		before := int64(0)
		for {
			page, err := st.Search(ctx, store.Search{Before: before, Limit: 5})
			if err != nil {
				t.Fatal(err)
			}
			paged = append(paged, messageIDs(page)...)
			if len(page) < 5 {
				break
			}
			before = page[len(page)-1].ID
		}
		if !slices.Equal(paged, want) {
			t.Errorf("paged %v, want %v", paged, want)
		}
	})
}

func TestGet(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		ctx := context.Background()
		m := newMsg("order.created", "")
		m.Payload = strings.Repeat("a", 1000)
		insert(t, db, st, m)
		r, err := st.Get(ctx, strings.ToUpper(m.MessageID))
		if err != nil {
			t.Fatal(err)
		}
		if r.MessageID != m.MessageID || r.Payload != m.Payload || r.Key != nil || r.LastError != nil || r.Status != "pending" || r.MaxAttempts != 10 {
			t.Errorf("get: %+v", r)
		}
		if !strings.Contains(r.Headers, `"content-type"`) {
			t.Errorf("headers %q", r.Headers)
		}
		if r.AvailableAt.IsZero() || r.CreatedAt.IsZero() {
			t.Errorf("times: %+v", r)
		}
		for _, id := range []string{uuid.NewString(), "not-a-uuid", ""} {
			if _, err := st.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("get %q: %v, want ErrNotFound", id, err)
			}
		}
	})
}

func TestSingleChanges(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		ctx := context.Background()
		dead, sent, pending := newMsg("t.a", "k"), newMsg("t.a", "k"), newMsg("t.a", "")
		insert(t, db, st, dead, sent, pending)
		setStatus(t, db, store.StatusDead, dead.MessageID)
		setStatus(t, db, store.StatusSent, sent.MessageID)
		status := func(id string) string {
			r, err := st.Get(ctx, id)
			if errors.Is(err, store.ErrNotFound) {
				return "gone"
			}
			if err != nil {
				t.Fatal(err)
			}
			return r.Status
		}
		wrong := func(what string, err error, want string) {
			t.Helper()
			var se *store.StatusError
			if !errors.As(err, &se) || se.Status != want || !errors.Is(err, store.ErrWrongStatus) {
				t.Errorf("%s: %v, want a status error for %s", what, err, want)
			}
		}

		if err := st.RequeueOne(ctx, uuid.NewString()); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("requeue unknown: %v", err)
		}
		wrong("requeue sent", st.RequeueOne(ctx, sent.MessageID), "sent")
		if err := st.RequeueOne(ctx, dead.MessageID); err != nil {
			t.Fatal(err)
		}
		r, _ := st.Get(ctx, dead.MessageID)
		if r.Status != "pending" || r.Attempts != 0 || r.AvailableAt.After(time.Now().Add(time.Minute)) {
			t.Errorf("requeued: %+v", r)
		}
		if err := st.RequeueOne(ctx, pending.MessageID); err != nil {
			t.Errorf("requeue pending: %v", err)
		}

		wrong("discard pending", st.DiscardOne(ctx, pending.MessageID), "pending")
		setStatus(t, db, store.StatusDead, pending.MessageID)
		if err := st.DiscardOne(ctx, pending.MessageID); err != nil || status(pending.MessageID) != "gone" {
			t.Errorf("discard dead: %v, now %s", err, status(pending.MessageID))
		}
		if err := st.DiscardOne(ctx, pending.MessageID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("discard again: %v", err)
		}

		_, err := st.ConsumeOne(ctx, dead.MessageID)
		wrong("consume pending", err, "pending")
		if _, err := st.ConsumeOne(ctx, uuid.NewString()); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("consume unknown: %v", err)
		}
		changed, err := st.ConsumeOne(ctx, sent.MessageID)
		if err != nil || !changed {
			t.Fatalf("consume sent: %v %v", changed, err)
		}
		r, _ = st.Get(ctx, sent.MessageID)
		if r.Status != "consumed" || r.ConsumedAt == nil || r.SentAt == nil {
			t.Errorf("consumed: %+v", r)
		}
		changed, err = st.ConsumeOne(ctx, sent.MessageID)
		if err != nil || changed {
			t.Errorf("consume again: %v %v, want no change and no error", changed, err)
		}
	})
}

func TestBulk(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		ctx := context.Background()
		var a, b, s []string
		var in []store.NewMessage
		for i := range 25 {
			m := newMsg("t.a", fmt.Sprint("k", i%4))
			a = append(a, m.MessageID)
			in = append(in, m)
		}
		for range 5 {
			m := newMsg("t.b", "")
			b = append(b, m.MessageID)
			in = append(in, m)
		}
		for range 3 {
			m := newMsg("t.a", "")
			s = append(s, m.MessageID)
			in = append(in, m)
		}
		insert(t, db, st, in...)
		setStatus(t, db, store.StatusDead, append(slices.Clone(a), b...)...)
		setStatus(t, db, store.StatusSent, s...)

		n, err := st.CountBulk(ctx, store.ActionRequeue, store.BulkFilter{Topic: "t.a"})
		if err != nil || n != 25 {
			t.Fatalf("count requeue t.a: %d %v, want 25", n, err)
		}
		n, err = st.CountBulk(ctx, store.ActionConsumed, store.BulkFilter{Topic: "t.a"})
		if err != nil || n != 3 {
			t.Fatalf("count consumed t.a: %d %v, want 3", n, err)
		}
		if _, err := st.CountBulk(ctx, store.ActionDiscard, store.BulkFilter{Status: "sent"}); err == nil {
			t.Error("discard of sent messages accepted")
		}

		var progress []int64
		n, err = st.Bulk(ctx, store.ActionRequeue, store.BulkFilter{Topic: "t.a"}, store.BulkOptions{BatchSize: 10, Progress: func(c int64) { progress = append(progress, c) }})
		if err != nil || n != 25 {
			t.Fatalf("requeue t.a: %d %v", n, err)
		}
		if !slices.Equal(progress, []int64{10, 20, 25}) {
			t.Errorf("progress %v, want [10 20 25]", progress)
		}
		if got := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE topic = 't.a' AND status = 'pending' AND attempts = 0"); got != 25 {
			t.Errorf("%d t.a messages pending with attempts 0, want 25", got)
		}
		if got := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'dead'"); got != 5 {
			t.Errorf("%d dead left, want 5 (t.b)", got)
		}

		// Requeue of pending rows takes those waiting on a backoff only.
		db.Exec(t, testdb.Placeholder(db.Dialect, "UPDATE outbox_messages SET available_at = "+hoursAgo(db.Dialect, -1)+", attempts = 2 WHERE message_id = ?"), a[0])
		n, err = st.CountBulk(ctx, store.ActionRequeue, store.BulkFilter{Status: "pending", Topic: "t.a"})
		if err != nil || n != 1 {
			t.Fatalf("count waiting: %d %v, want 1", n, err)
		}
		n, err = st.Bulk(ctx, store.ActionRequeue, store.BulkFilter{Status: "pending", Key: "k0"}, store.BulkOptions{})
		if err != nil || n != 1 {
			t.Fatalf("requeue waiting: %d %v, want 1", n, err)
		}
		if r, _ := st.Get(ctx, a[0]); r.Attempts != 0 || r.AvailableAt.After(time.Now().Add(30*time.Minute)) {
			t.Errorf("waiting message after requeue: %+v", r)
		}

		n, err = st.Bulk(ctx, store.ActionDiscard, store.BulkFilter{MessageIDs: []string{strings.ToUpper(b[0]), b[1], a[1], "junk"}}, store.BulkOptions{BatchSize: 1})
		if err != nil || n != 2 {
			t.Fatalf("discard by ids: %d %v, want 2 (a[1] is pending)", n, err)
		}
		n, err = st.Bulk(ctx, store.ActionConsumed, store.BulkFilter{Since: time.Now().Add(-time.Hour)}, store.BulkOptions{})
		if err != nil || n != 3 {
			t.Fatalf("consumed: %d %v, want 3", n, err)
		}
		if got := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'consumed' AND consumed_at IS NOT NULL"); got != 3 {
			t.Errorf("%d consumed, want 3", got)
		}
		n, err = st.Bulk(ctx, store.ActionDiscard, store.BulkFilter{Until: time.Now().Add(-time.Hour)}, store.BulkOptions{})
		if err != nil || n != 0 {
			t.Errorf("discard of nothing: %d %v", n, err)
		}
	})
}

func TestAudit(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		ctx := context.Background()
		es, err := st.Audit(ctx, 10)
		if err != nil || len(es) != 0 {
			t.Fatalf("empty audit: %v %v", es, err)
		}
		for i, a := range []string{"requeue", "discard", "consumed"} {
			if err := st.InsertAudit(ctx, store.AuditEntry{Actor: "ops", Action: a, Target: `{"topic":"t"}`, Count: int64(i + 1)}); err != nil {
				t.Fatal(err)
			}
		}
		es, err = st.Audit(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != 2 || es[0].Action != "consumed" || es[0].Count != 3 || es[1].Action != "discard" || es[0].Actor != "ops" || es[0].Target != `{"topic":"t"}` {
			t.Fatalf("audit: %+v", es)
		}
		if d := time.Since(es[0].At); d > time.Minute || d < -time.Minute {
			t.Errorf("audit time %v is not the database's now", es[0].At)
		}
	})
}

// TestReplay: sent and consumed messages go back to pending with their
// message ids, by filter, in batches; with Archive, archived ones move
// back too, except a message id that is in outbox_messages again.
func TestReplay(t *testing.T) {
	conformance(t, func(t *testing.T, db *testdb.DB, st *store.Store) {
		ctx := context.Background()
		sent, consumed, pending, dead, other := newMsg("r.t", "k"), newMsg("r.t", "k"), newMsg("r.t", ""), newMsg("r.t", ""), newMsg("r.other", "")
		old, again := newMsg("r.t", ""), newMsg("r.t", "")
		insert(t, db, st, old, again, sent, consumed, pending, dead, other)
		setStatus(t, db, store.StatusSent, sent.MessageID, other.MessageID, old.MessageID, again.MessageID)
		setStatus(t, db, store.StatusConsumed, consumed.MessageID)
		setStatus(t, db, store.StatusDead, dead.MessageID)
		// old and again were sent two hours ago and archived since.
		db.Exec(t, testdb.Placeholder(db.Dialect, "UPDATE outbox_messages SET sent_at = "+hoursAgo(db.Dialect, 2)+" WHERE message_id IN (?, ?)"), old.MessageID, again.MessageID)
		if b, err := st.Retain(ctx, 0, 100, store.RetentionPolicy{Sent: time.Hour, Dead: 100 * time.Hour, Archive: true}); err != nil || b.Removed != 2 {
			t.Fatalf("archiving two messages: %+v %v", b, err)
		}
		// A producer enqueued again's message id anew.
		reused := again
		insert(t, db, st, reused)

		if _, err := st.CountBulk(ctx, store.ActionReplay, store.BulkFilter{Status: store.StatusDead}); err == nil {
			t.Error("replay of dead messages accepted")
		}
		if _, err := st.CountBulk(ctx, store.ActionRequeue, store.BulkFilter{Archive: true}); err == nil {
			t.Error("requeue from the archive accepted")
		}
		n, err := st.CountBulk(ctx, store.ActionReplay, store.BulkFilter{Topic: "r.t"})
		if err != nil || n != 2 {
			t.Fatalf("count replay r.t: %d %v, want 2 (sent and consumed)", n, err)
		}
		n, err = st.CountBulk(ctx, store.ActionReplay, store.BulkFilter{Topic: "r.t", Archive: true})
		if err != nil || n != 3 {
			t.Fatalf("count replay r.t with the archive: %d %v, want 3 (and old)", n, err)
		}
		n, err = st.Bulk(ctx, store.ActionReplay, store.BulkFilter{Key: "k", Status: store.StatusConsumed}, store.BulkOptions{})
		if err != nil || n != 1 {
			t.Fatalf("replay consumed of key k: %d %v, want 1", n, err)
		}
		var progress []int64
		n, err = st.Bulk(ctx, store.ActionReplay, store.BulkFilter{Topic: "r.t", Archive: true}, store.BulkOptions{BatchSize: 1, Progress: func(c int64) { progress = append(progress, c) }})
		if err != nil || n != 2 {
			t.Fatalf("replay r.t with the archive: %d %v, want 2 (sent, old)", n, err)
		}
		// One batch per row: sent, then old, then again's archived row,
		// which stays.
		if !slices.Equal(progress, []int64{1, 2, 2}) {
			t.Errorf("progress %v, want [1 2 2]", progress)
		}
		for _, m := range []store.NewMessage{sent, consumed, old} {
			r, err := st.Get(ctx, m.MessageID)
			if err != nil || r.Status != store.StatusPending || r.Attempts != 0 || r.SentAt != nil || r.ConsumedAt != nil || r.LastError != nil || r.Topic != "r.t" {
				t.Errorf("%s after replay: %+v %v", m.MessageID, r, err)
			}
		}
		for m, want := range map[string]string{pending.MessageID: "pending", dead.MessageID: "dead", other.MessageID: "sent"} {
			if r, err := st.Get(ctx, m); err != nil || r.Status != want {
				t.Errorf("%s is %q (%v), want it left %s", m, r.Status, err, want)
			}
		}
		if got := db.Count(t, "SELECT count(*) FROM outbox_messages_archive"); got != 1 {
			t.Errorf("%d rows left in the archive, want 1 (the message id enqueued again)", got)
		}
		if got := db.Count(t, testdb.Placeholder(db.Dialect, "SELECT count(*) FROM outbox_messages WHERE message_id = ?"), old.MessageID); got != 1 {
			t.Errorf("%d rows of the archived message in outbox_messages, want 1", got)
		}
	})
}
