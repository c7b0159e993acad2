package outbox_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// partitionedDB is a fresh PostgreSQL schema migrated through the public
// API with a partitioned outbox_messages.
func partitionedDB(t *testing.T) *testdb.DB {
	t.Helper()
	db := testdb.Empty(t, store.Postgres)
	opts := &outbox.MigrateOpts{Partitioned: true}
	if done, err := outbox.Migrate(context.Background(), db.PGX, opts); err != nil || len(done) < 3 {
		t.Fatalf("migrate --partitioned applied %v: %v", done, err)
	}
	if done, err := outbox.Migrate(context.Background(), db.Std, opts); err != nil || len(done) != 0 {
		t.Fatalf("second migrate applied %v: %v", done, err)
	}
	return db
}

// dayPartition is the name of the partition daysAgo UTC days before today.
func dayPartition(daysAgo int) string {
	return "outbox_messages_p" + time.Now().UTC().AddDate(0, 0, -daysAgo).Format("20060102")
}

// idAt is a version 7 message id of time at.
func idAt(t *testing.T, at time.Time) string {
	t.Helper()
	u, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(at.UnixMilli()))
	copy(u[:6], ms[2:])
	return u.String()
}

func partitionRows(t *testing.T, db *testdb.DB) map[string]int {
	t.Helper()
	rows, err := db.SQL.Query("SELECT tableoid::regclass::text, count(*) FROM outbox_messages GROUP BY 1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		out[name] = n
	}
	return out
}

// TestPartitionedProducerAndRelay: on a partitioned table, messages whose
// ids fall into two days (and a foreign insert without message_id) are
// all delivered, each key in enqueue order across the days, and a
// duplicate message id is still refused.
func TestPartitionedProducerAndRelay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := partitionedDB(t)
	if _, err := db.Store().AddPartitions(ctx, -2, -2); err != nil {
		t.Fatal(err)
	}
	p, err := outbox.NewProducer(db.PGX, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	in := msgs(n, "order.created", func(i int) string { return "k" + strconv.Itoa(i%7) })
	twoDaysAgo := time.Now().Add(-48 * time.Hour)
	for i := range in {
		if i%2 == 0 {
			in[i].ID = idAt(t, twoDaysAgo) // an older day; odd ones get today's default id
		}
	}
	enqueue := func(ms []outbox.Message) error {
		tx, err := db.Pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := p.EnqueueMany(ctx, tx, ms); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	if err := enqueue(in); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, `INSERT INTO outbox_messages (topic, business_key, payload) VALUES ('order.created', 'k0', '{"n":1000}')`)
	counts := partitionRows(t, db)
	if counts[dayPartition(2)] != n/2 || counts[dayPartition(0)] != n/2+1 || len(counts) != 2 {
		t.Fatalf("rows per partition: %v", counts)
	}

	err = enqueue([]outbox.Message{{Topic: "order.created", Payload: []byte(`{}`), ID: in[4].ID}})
	if !errors.Is(err, outbox.ErrDuplicateMessageID) {
		t.Fatalf("enqueue of an existing id: %v", err)
	}

	sink := newSink()
	r, err := outbox.NewRelay(db.PGX, harness.Config(outbox.Route{Pattern: "*", Publisher: outbox.PublisherFunc(sink.publish)}))
	if err != nil {
		t.Fatal(err)
	}
	relaytest.Run(t, r)
	relaytest.WaitFor(t, 30*time.Second, "every message delivered", func() bool { return sink.distinct() == n+1 })
	relaytest.WaitFor(t, 10*time.Second, "every message settled", func() bool {
		return db.Count(t, "SELECT count(*) FROM outbox_messages WHERE status = 'sent'") == n+1
	})
	sink.mu.Lock()
	defer sink.mu.Unlock()
	last := map[string]int{}
	for _, env := range sink.got {
		var k int
		if _, err := fmt.Sscanf(string(env.Payload), `{"n":%d}`, &k); err != nil {
			t.Fatalf("payload %q", env.Payload)
		}
		if prev, ok := last[env.Key]; ok && k < prev {
			t.Fatalf("key %s: message %d delivered after %d", env.Key, k, prev)
		}
		last[env.Key] = k
	}
	if last["k0"] != 1000 {
		t.Fatalf("the foreign insert of k0 was not delivered last: %d", last["k0"])
	}
}

// TestPartitionedRetention: the relay holding partition 0 drops a past
// day whose rows are all due (or keeps it as an archive table), keeps a
// day with a pending row (removing its due rows one by one) and one with
// a dead row still within its retention, deletes due rows of the default
// partition, and creates the days ahead.
func TestPartitionedRetention(t *testing.T) {
	for _, archive := range []bool{false, true} {
		t.Run(fmt.Sprintf("archive=%v", archive), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := partitionedDB(t)
			if _, err := db.Store().AddPartitions(ctx, -12, -10); err != nil {
				t.Fatal(err)
			}
			ahead := dayPartition(-3)
			db.Exec(t, "DROP TABLE "+ahead)
			row := func(daysAgo int, topic, status, created, available, sent string) {
				id := uuid.NewString() // a version 4 id: the default partition
				if daysAgo >= 0 {
					id = idAt(t, time.Now().AddDate(0, 0, -daysAgo))
				}
				db.Exec(t, fmt.Sprintf(`INSERT INTO outbox_messages (message_id, topic, payload, status, created_at, available_at, sent_at)
VALUES ('%s', '%s', '{}', '%s', now() - interval '%s', now() - interval '%s', %s)`, id, topic, status, created, available, sent))
			}
			old := "now() - interval '12 days'"
			for range 3 {
				row(12, "day12.sent", "sent", "12 days", "12 days", old)
			}
			row(11, "day11.sent", "sent", "11 days", "11 days", old)
			row(11, "day11.sent", "sent", "11 days", "11 days", old)
			row(11, "day11.delayed", "pending", "11 days", "-1 day", "NULL")
			row(10, "day10.sent", "sent", "10 days", "10 days", old)
			row(10, "day10.dead", "dead", "10 days", "1 hour", "NULL")
			row(-1, "default.sent", "sent", "3 hours", "3 hours", "now() - interval '3 hours'")
			row(0, "today.sent", "sent", "1 minute", "1 minute", "now()")

			var s sweeps
			r, err := outbox.NewRelay(db.PGX, retentionConfig(&s, archive))
			if err != nil {
				t.Fatal(err)
			}
			relaytest.Run(t, r)
			relaytest.WaitFor(t, 30*time.Second, "sweeps removing 6 rows", func() bool {
				_, removed := s.by(r.ID())
				return removed >= 6
			})
			s.mu.Lock()
			dropped, created := 0, 0
			for _, rep := range s.reps {
				dropped += rep.PartitionsDropped
				created += rep.PartitionsCreated
			}
			s.mu.Unlock()
			if dropped != 1 || created != 1 {
				t.Fatalf("sweeps dropped %d and created %d partitions, want 1 and 1", dropped, created)
			}
			if errs := s.errs(); len(errs) > 0 {
				t.Fatalf("sweep errors: %v", errs)
			}
			parts := db.Attached(t)
			if parts[dayPartition(12)] || !parts[dayPartition(11)] || !parts[dayPartition(10)] || !parts[ahead] {
				t.Fatalf("partitions after retention: %v", parts)
			}
			got := topics(t, db, "outbox_messages")
			slices.Sort(got)
			if want := []string{"day10.dead", "day10.sent", "day11.delayed", "today.sent"}; !slices.Equal(got, want) {
				t.Fatalf("kept %v, want %v", got, want)
			}
			archived := topics(t, db, "outbox_messages_archive")
			slices.Sort(archived)
			kept := db.Count(t, "SELECT count(*) FROM pg_class WHERE oid = to_regclass($1)", "outbox_messages_archive_"+strings.TrimPrefix(dayPartition(12), "outbox_messages_p"))
			if archive {
				if want := []string{"day11.sent", "day11.sent", "default.sent"}; !slices.Equal(archived, want) || kept != 1 {
					t.Fatalf("archive holds %v and the archived day exists %d times", archived, kept)
				}
				if n := db.Count(t, "SELECT count(*) FROM outbox_messages_archive_"+strings.TrimPrefix(dayPartition(12), "outbox_messages_p")+" WHERE topic = 'day12.sent'"); n != 3 {
					t.Fatalf("archived day holds %d rows, want 3", n)
				}
			} else if len(archived) != 0 || kept != 0 || db.Count(t, "SELECT count(*) FROM pg_class WHERE oid = to_regclass($1)", dayPartition(12)) != 0 {
				t.Fatalf("without archive: archive holds %v, day table left: %d", archived, kept)
			}
		})
	}
}
