package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/dburl"
)

// The snapshot read path, prototyped for `drain --read-path snapshot`
// (docs/design.md, "A read path that writes nothing per message"): the
// rows carry the id of the transaction that wrote them, a batch is the
// rows whose transaction is visible in one snapshot and was not in the
// one before, and nothing is written per delivered message. The run
// takes a database of its own on --db's server (the column and index are
// added there, never to the table --db names) and drops it after.
//
// What it measures is the database's side and the drain rate it allows:
// one reader pages through the backlog's snapshot pair and hands each
// page's rows to the workers by partition, which publish them as the
// publish workload does (waves of at most one message per key, each
// call's confirmations awaited). Failures stop the run: the prototype has
// no retry path, which is where the option would need the most work.
const (
	readPathTable    = "table"
	readPathSnapshot = "snapshot"
)

// snapshotSchema adds the transaction id column, filled by its default,
// and the index the batches are read by.
var snapshotSchema = []string{
	"ALTER TABLE outbox_messages ADD COLUMN outbox_txid xid8 NOT NULL DEFAULT pg_current_xact_id()",
	"CREATE INDEX outbox_messages_txid_idx ON outbox_messages (outbox_txid, id)",
}

// snapshotPage reads the next page of the batch between snapshots $1 and
// $2, after the row ($3, $4), in the order of the index.
const snapshotPage = `SELECT id, outbox_txid::text AS txid_text, message_id::text, topic, business_key, payload, partition_no
FROM outbox_messages
WHERE outbox_txid >= pg_snapshot_xmin($1::pg_snapshot) AND outbox_txid < pg_snapshot_xmax($2::pg_snapshot)
  AND pg_visible_in_snapshot(outbox_txid, $2::pg_snapshot) AND NOT pg_visible_in_snapshot(outbox_txid, $1::pg_snapshot)
  AND (outbox_txid, id) > ($3::xid8, $4::bigint)
ORDER BY outbox_txid, id
LIMIT $5`

// drainSnapshotRun runs drain --read-path snapshot in a fresh database.
func drainSnapshotRun(ctx context.Context, o *options, dest *destination, stderr io.Writer) (res *result, runErr, cleanErr error) {
	d, _, err := dburl.Parse(o.dbURL)
	if err != nil {
		return nil, err, nil
	}
	url, drop, err := freshDatabase(ctx, o.dbURL, d, "bench_snapshot_"+newRunID())
	if err != nil {
		return nil, err, nil
	}
	to := *o
	to.dbURL = url
	b, err := open(ctx, &to, dest, stderr)
	if err != nil {
		return nil, err, drop()
	}
	b.scratch = true
	res, runErr = b.run(ctx)
	return res, runErr, errors.Join(b.close(), drop())
}

// drainSnapshot times the backlog delivered through snapshot batches.
func (b *bench) drainSnapshot(ctx context.Context) (*drainResult, error) {
	pool := b.db.Pool
	for _, q := range snapshotSchema {
		if _, err := pool.Exec(ctx, q); err != nil {
			return nil, fmt.Errorf("snapshot schema: %w", err)
		}
	}
	var prev, cur string
	if err := pool.QueryRow(ctx, "SELECT pg_current_snapshot()::text").Scan(&prev); err != nil {
		return nil, err
	}
	res := &drainResult{Messages: b.o.messages, ReadPath: readPathSnapshot}
	topic := b.topic("drain")
	if err := b.prepareBacklog(ctx, res, topic); err != nil {
		return nil, err
	}
	if err := pool.QueryRow(ctx, "SELECT pg_current_snapshot()::text").Scan(&cur); err != nil {
		return nil, err
	}

	workers := b.o.workersOrDefault()
	var st publishStats
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queues := make([]chan []snapshotRow, workers)
	var wg sync.WaitGroup
	for w := range queues {
		queues[w] = make(chan []snapshotRow, 2)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rows := range queues[w] {
				if !b.publishRows(ctx, rows, &st) {
					cancel()
				}
			}
		}()
	}
	stop := b.every(func(time.Duration) string {
		return fmt.Sprintf("drain: %s/%s confirmed", commas(st.confirmed.Load()), commas(int64(b.o.messages)))
	})
	m0 := sampleMachine()
	cpu0 := cpuTime()
	start := time.Now()
	read, readErr := b.readSnapshotBatch(ctx, prev, cur, queues)
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
	wall := time.Since(start)
	cpu := cpuTime() - cpu0
	res.Machine = cpuSince(m0)
	stop()
	res.Delivered = st.confirmed.Load()
	switch {
	case readErr != nil:
		return nil, fmt.Errorf("read: %w", readErr)
	case st.failed.Load() > 0:
		return nil, fmt.Errorf("publish: %s messages failed, the first: %v", commas(st.failed.Load()), st.firstErr)
	case read != int64(b.o.messages):
		return nil, fmt.Errorf("verify: the batch held %s of the %s messages written", commas(read), commas(int64(b.o.messages)))
	case res.Delivered != read:
		return nil, fmt.Errorf("verify: %s of %s messages confirmed", commas(res.Delivered), commas(read))
	}
	res.measure(res.Delivered, wall, cpu)
	res.Batches = batchStats{Rounds: st.rounds.Load(), Sent: res.Delivered}
	if res.Batches.Rounds > 0 {
		res.Batches.MeanRead = float64(read) / float64(res.Batches.Rounds)
	}
	if b.brokerHeld != nil {
		held, err := b.brokerHeld(ctx)
		if err != nil {
			return nil, fmt.Errorf("verify: count the messages in the %s: %w", b.brokerWhat, err)
		}
		if held != res.Delivered {
			return nil, fmt.Errorf("verify: the %s holds %s messages after %s were confirmed", b.brokerWhat, commas(held), commas(res.Delivered))
		}
	}
	return res, nil
}

// snapshotRow is one row of a snapshot batch.
type snapshotRow struct {
	txid, messageID, topic, key string
	payload                     []byte
}

// readSnapshotBatch pages through the rows between snapshots prev and cur
// on one connection, whose plans it pins to the index as the relay's
// statements are, and hands each page's rows to the queue of their
// partition's worker. It returns how many rows it read.
func (b *bench) readSnapshotBatch(ctx context.Context, prev, cur string, queues []chan []snapshotRow) (int64, error) {
	conn, err := b.db.Pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	for _, q := range []string{"SET enable_seqscan = off", "SET enable_bitmapscan = off", "SET plan_cache_mode = force_generic_plan"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return 0, err
		}
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "RESET ALL")
	}()
	batch := b.o.batchSizeOrDefault()
	afterTxid, afterID := "0", int64(0)
	var read int64
	for {
		rows, err := conn.Query(ctx, snapshotPage, prev, cur, afterTxid, afterID, batch)
		if err != nil {
			return read, err
		}
		parts := make([][]snapshotRow, len(queues))
		n := 0
		var id int64
		var part int16
		for rows.Next() {
			var r snapshotRow
			var key *string
			if err := rows.Scan(&id, &r.txid, &r.messageID, &r.topic, &key, &r.payload, &part); err != nil {
				rows.Close()
				return read, err
			}
			if key != nil {
				r.key = *key
			}
			w := int(part) % len(queues)
			parts[w] = append(parts[w], r)
			afterTxid, afterID = r.txid, id
			n++
		}
		if err := rows.Err(); err != nil {
			return read, err
		}
		read += int64(n)
		for w, p := range parts {
			if len(p) == 0 {
				continue
			}
			select {
			case queues[w] <- p:
			case <-ctx.Done():
				return read, ctx.Err()
			}
		}
		if n < batch {
			return read, nil
		}
	}
}

// publishRows publishes one worker's share of a page in waves of at most
// one message per key, as the relay's workers do. It returns false when
// a message failed or ctx ended.
func (b *bench) publishRows(ctx context.Context, rows []snapshotRow, st *publishStats) bool {
	now := time.Now()
	var waves [][]*outbox.Envelope
	seen := map[string]int{}
	for _, r := range rows {
		waves = inWave(waves, seen, envelope(r.messageID, r.topic, r.key, r.payload, now))
	}
	st.rounds.Add(1)
	for _, wave := range waves {
		if ctx.Err() != nil || !b.publishCall(ctx, wave, st) {
			return false
		}
	}
	return true
}
