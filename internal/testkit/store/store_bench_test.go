package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// The relay's hot statements, timed on each database:
//
//	go test -run '^$' -bench . -benchmem ./internal/store/

// benchBatch is the relay's default largest batch.
const benchBatch = 1000

// eachDialect runs fn as a sub-benchmark per database, on a fresh one.
func eachDialect(b *testing.B, fn func(b *testing.B, db *testdb.DB, st *store.Store)) {
	for _, d := range []store.Dialect{store.Postgres, store.MySQL, store.SQLite} {
		b.Run(string(d), func(b *testing.B) {
			db := testdb.New(b, d)
			fn(b, db, db.Store())
		})
	}
}

// fill commits n pending messages over keys distinct keys, 1,000 per
// transaction.
func fill(b *testing.B, db *testdb.DB, st *store.Store, n, keys int) {
	b.Helper()
	for done := 0; done < n; {
		msgs := make([]store.NewMessage, 0, benchBatch)
		for ; len(msgs) < benchBatch && done < n; done++ {
			msgs = append(msgs, newMsg("bench.read", fmt.Sprintf("customer-%d", done%keys)))
		}
		insert(b, db, st, msgs...)
	}
	switch db.Dialect { // fresh statistics, as autovacuum keeps them
	case store.Postgres:
		db.Exec(b, "ANALYZE outbox_messages")
	case store.MySQL:
		db.Exec(b, "ANALYZE TABLE outbox_messages")
	}
}

// BenchmarkInsert is one enqueue: a transaction inserting one message.
func BenchmarkInsert(b *testing.B) {
	eachDialect(b, func(b *testing.B, db *testdb.DB, st *store.Store) {
		for b.Loop() {
			insert(b, db, st, newMsg("bench.insert", "customer-1"))
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
	})
}

// BenchmarkRead reads a batch of 1,000 ready messages from a table of
// 10,000 pending ones over every partition; nothing is settled, so each
// read does the same work.
func BenchmarkRead(b *testing.B) {
	eachDialect(b, func(b *testing.B, db *testdb.DB, st *store.Store) {
		fill(b, db, st, 10*benchBatch, 5000)
		parts := allParts(b, st)
		ctx := context.Background()
		for b.Loop() {
			rows, err := st.Read(ctx, parts, benchBatch)
			if err != nil {
				b.Fatal(err)
			}
			if len(rows) != benchBatch {
				b.Fatalf("read %d rows, want %d", len(rows), benchBatch)
			}
		}
		b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "rows/s")
	})
}

// BenchmarkSettle marks a batch of 1,000 read messages sent in the one
// fenced statement the relay uses.
func BenchmarkSettle(b *testing.B) {
	eachDialect(b, func(b *testing.B, db *testdb.DB, st *store.Store) {
		parts := acquireAll(b, st, "bench")
		ctx := context.Background()
		for b.Loop() {
			b.StopTimer()
			fill(b, db, st, benchBatch, 5000)
			rows, err := st.Read(ctx, parts, benchBatch)
			if err != nil || len(rows) != benchBatch {
				b.Fatalf("read %d rows: %v", len(rows), err)
			}
			outs := make([]store.Outcome, len(rows))
			for i, r := range rows {
				outs[i] = store.Outcome{ID: r.ID, Status: store.StatusSent, CountAttempt: true}
			}
			b.StartTimer()
			n, err := st.Settle(ctx, "bench", outs)
			if err != nil || n != benchBatch {
				b.Fatalf("settled %d rows: %v", n, err)
			}
		}
		b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "rows/s")
	})
}

// BenchmarkMarkInflight is the statement each round runs before
// publishing: the in-flight marks of one worker's share of the partitions
// (a quarter of them), each changing as a drain moves on.
func BenchmarkMarkInflight(b *testing.B) {
	eachDialect(b, func(b *testing.B, db *testdb.DB, st *store.Store) {
		all := acquireAll(b, st, "bench")
		var parts []int
		for i, p := range all {
			if i%4 == 0 {
				parts = append(parts, p)
			}
		}
		ctx := context.Background()
		ids := make([]int64, len(parts))
		next := int64(1)
		for b.Loop() {
			for i := range ids {
				ids[i] = next
				next++
			}
			if err := st.MarkInflight(ctx, "bench", parts, ids); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReadBehindWaitingHead reads past a key whose head waits out a
// backoff, with 5,000 due rows of the key before the head and 5,000
// behind it: the rows behind are probed and held back on every read.
func BenchmarkReadBehindWaitingHead(b *testing.B) {
	eachDialect(b, func(b *testing.B, db *testdb.DB, st *store.Store) {
		const n = 5000
		want := fillBehindHead(b, db, st, n, n)
		switch db.Dialect {
		case store.Postgres:
			db.Exec(b, "ANALYZE outbox_messages")
		case store.MySQL:
			db.Exec(b, "ANALYZE TABLE outbox_messages")
		}
		for b.Loop() {
			if got := readIDs(b, st, 4*n); len(got) != len(want) {
				b.Fatalf("read %d rows, want %d", len(got), len(want))
			}
		}
	})
}
