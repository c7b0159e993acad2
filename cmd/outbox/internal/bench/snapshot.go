package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/store"
)

// The snapshot read path, prototyped for `drain` and `steady --read-path
// snapshot` (docs/design.md, "A read path that writes nothing per
// message"): the
// rows carry the id of the transaction that wrote them, a batch is the
// rows whose transaction is visible in one snapshot and was not in the
// one before, and nothing is written per delivered message. The run
// takes a database of its own on --db's server (the column and index are
// added there, never to the table --db names) and drops it after.
//
// What it measures is the database's side, the drain rate it allows and
// its latency at a fixed rate. A drain has one reader page through the
// backlog's snapshot pair and hand each page's rows to the workers by
// partition; steady has one loop in place of the relays (see
// startSnapshotRelay). Both publish as the publish workload does (waves
// of at most one message per key, each call's confirmations awaited).
// Failures stop the run: the prototype has no retry path, which is where
// the option would need the most work.
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

// snapshotPage reads a page of the batch after snapshot $1, up to
// snapshot $2 (NULL: a new one, returned in every row, and in a row of
// NULLs when the page is empty), after the row ($3, $4), in the order of
// the index.
const snapshotPage = `WITH s AS MATERIALIZED (SELECT coalesce($2::pg_snapshot, pg_current_snapshot()) AS cur)
SELECT s.cur::text AS cur, m.id, m.outbox_txid::text AS txid_text, m.message_id::text, m.topic, m.business_key, m.payload,
       m.headers::text, m.partition_no
FROM s LEFT JOIN LATERAL (
    SELECT * FROM outbox_messages
    WHERE outbox_txid >= pg_snapshot_xmin($1::pg_snapshot) AND outbox_txid < pg_snapshot_xmax(s.cur)
      AND pg_visible_in_snapshot(outbox_txid, s.cur) AND NOT pg_visible_in_snapshot(outbox_txid, $1::pg_snapshot)
      AND (outbox_txid, id) > ($3::xid8, $4::bigint)
    ORDER BY outbox_txid, id
    LIMIT $5) AS m ON true
ORDER BY m.outbox_txid, m.id`

// snapshotRun runs drain or steady --read-path snapshot in a fresh
// database.
func snapshotRun(ctx context.Context, o *options, dest *destination, stderr io.Writer) (res *result, runErr, cleanErr error) {
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
	res, runErr, closeErr := inScratch(ctx, &to, dest, stderr, (*bench).run)
	return res, runErr, errors.Join(closeErr, drop())
}

// currentSnapshot is the database's snapshot now, as text.
func currentSnapshot(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (string, error) {
	var snap string
	err := q.QueryRow(ctx, "SELECT pg_current_snapshot()::text").Scan(&snap)
	return snap, err
}

// addSnapshotColumn adds the snapshot read path's column and index to the
// run's own database.
func (b *bench) addSnapshotColumn(ctx context.Context) error {
	for _, q := range snapshotSchema {
		if _, err := b.db.Pool.Exec(ctx, q); err != nil {
			return fmt.Errorf("snapshot read path: %w", err)
		}
	}
	return nil
}

// drainSnapshot times the backlog delivered through snapshot batches.
func (b *bench) drainSnapshot(ctx context.Context) (*drainResult, error) {
	prev, err := currentSnapshot(ctx, b.db.Pool)
	if err != nil {
		return nil, err
	}
	res := &drainResult{Messages: b.o.messages, ReadPath: readPathSnapshot}
	topic := b.topic("drain")
	if err := b.prepareBacklog(ctx, res, topic); err != nil {
		return nil, err
	}
	cur, err := currentSnapshot(ctx, b.db.Pool)
	if err != nil {
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
				if !publishRows(ctx, b.dest.pub, rows, &st) {
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
	id                                   int64
	txid, messageID, topic, key, headers string
	payload                              []byte
	partition                            int16
}

// pinPlans makes conn's statements keep a generic plan on the
// transaction id index, as the relay's statements are pinned to theirs.
func pinPlans(ctx context.Context, conn *pgxpool.Conn) error {
	for _, q := range []string{"SET enable_seqscan = off", "SET enable_bitmapscan = off", "SET plan_cache_mode = force_generic_plan"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// readPage reads the page of the batch after snapshot prev, up to
// snapshot cur ("": a new one), after the row (afterTxid, afterID), and
// returns its rows and the snapshot it was cut by.
func readPage(ctx context.Context, conn *pgxpool.Conn, prev, cur, afterTxid string, afterID int64, limit int) ([]snapshotRow, string, error) {
	var upTo any
	if cur != "" {
		upTo = cur
	}
	rows, err := conn.Query(ctx, snapshotPage, prev, upTo, afterTxid, afterID, limit)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var out []snapshotRow
	for rows.Next() {
		var id *int64
		var txid, messageID, topic, key, headers *string
		var payload []byte
		var part *int16
		if err := rows.Scan(&cur, &id, &txid, &messageID, &topic, &key, &payload, &headers, &part); err != nil {
			return nil, "", err
		}
		if id == nil {
			continue // the empty page's row
		}
		r := snapshotRow{id: *id, txid: *txid, messageID: *messageID, topic: *topic, headers: *headers, payload: payload, partition: *part}
		if key != nil {
			r.key = *key
		}
		out = append(out, r)
	}
	return out, cur, rows.Err()
}

// readSnapshotBatch pages through the rows between snapshots prev and cur
// on one connection and hands each page's rows to the queue of their
// partition's worker. It returns how many rows it read.
func (b *bench) readSnapshotBatch(ctx context.Context, prev, cur string, queues []chan []snapshotRow) (int64, error) {
	conn, err := b.db.Pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	if err := pinPlans(ctx, conn); err != nil {
		return 0, err
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "RESET ALL")
	}()
	batch := b.o.batchSizeOrDefault()
	afterTxid, afterID := "0", int64(0)
	var read int64
	for {
		page, _, err := readPage(ctx, conn, prev, cur, afterTxid, afterID, batch)
		if err != nil {
			return read, err
		}
		read += int64(len(page))
		parts := make([][]snapshotRow, len(queues))
		for _, r := range page {
			w := int(r.partition) % len(queues)
			parts[w] = append(parts[w], r)
		}
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
		if len(page) < batch {
			return read, nil
		}
		last := page[len(page)-1]
		afterTxid, afterID = last.txid, last.id
	}
}

// publishRows publishes one worker's share of a page in waves of at most
// one message per key, as the relay's workers do. It returns false when
// a message failed or ctx ended.
func publishRows(ctx context.Context, pub outbox.Publisher, rows []snapshotRow, st *publishStats) bool {
	now := time.Now()
	var waves [][]*outbox.Envelope
	seen := map[string]int{}
	for _, r := range rows {
		env := envelope(r.messageID, r.topic, r.key, r.payload, now)
		var h map[string]string
		if err := json.Unmarshal([]byte(r.headers), &h); err != nil {
			st.fail(1, fmt.Errorf("message %s: headers: %w", r.messageID, err))
			return false
		}
		for k, v := range h {
			if _, ok := env.Headers[k]; !ok {
				env.Headers[k] = v
			}
		}
		waves = inWave(waves, seen, env)
	}
	st.rounds.Add(1)
	for _, wave := range waves {
		if ctx.Err() != nil || !publishCall(ctx, pub, wave, st) {
			return false
		}
	}
	return true
}

// The stand-in's pace: after a round that found messages it reads again
// snapshotGather later, as the relay gathers; otherwise it waits for a
// producer's signal or snapshotMaxPoll.
const (
	snapshotGather  = 3 * time.Millisecond
	snapshotMaxPoll = time.Second
)

// startSnapshotRelay stands in for the relays of steady --read-path
// snapshot: one loop on the relays' pool (so that the run's relay
// database CPU is its) that reads what committed since its last snapshot,
// held in memory, and publishes it in waves. It listens for the
// producers' signal as the relays do.
func (b *bench) startSnapshotRelay(ctx context.Context, pub outbox.Publisher, onBatch func(outbox.BatchReport)) (*relaySet, error) {
	pool := b.relayDB.Pool
	read, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	listen, err := pool.Acquire(ctx)
	if err != nil {
		read.Release()
		return nil, err
	}
	var prev string
	err = pinPlans(ctx, read)
	if err == nil {
		_, err = listen.Exec(ctx, "LISTEN "+store.NotifyChannel)
	}
	if err == nil {
		prev, err = currentSnapshot(ctx, read)
	}
	if err != nil {
		read.Release()
		listen.Release()
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	rs := &relaySet{cancel: cancel, done: make(chan error, 1), failed: make(chan error, 1), n: 1}
	wake := make(chan struct{}, 1)
	go func() {
		defer listen.Release()
		for {
			if _, err := listen.Conn().WaitForNotification(rctx); err != nil {
				return
			}
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()
	go func() {
		err := b.snapshotLoop(rctx, read, prev, pub, onBatch, wake)
		read.Release()
		if rctx.Err() != nil {
			err = nil
		}
		if err != nil {
			rs.failed <- err
		}
		rs.done <- err
	}()
	return rs, nil
}

// snapshotLoop runs the stand-in's rounds until ctx ends or a round
// fails.
func (b *bench) snapshotLoop(ctx context.Context, conn *pgxpool.Conn, prev string, pub outbox.Publisher, onBatch func(outbox.BatchReport), wake <-chan struct{}) error {
	batch := b.o.batchSizeOrDefault()
	poll := time.NewTimer(snapshotMaxPoll)
	defer poll.Stop()
	for {
		var st publishStats
		cur, afterTxid, afterID, read := "", "0", int64(0), 0
		for {
			page, at, err := readPage(ctx, conn, prev, cur, afterTxid, afterID, batch)
			if err != nil {
				return fmt.Errorf("read: %w", err)
			}
			cur = at
			read += len(page)
			if len(page) > 0 && !publishRows(ctx, pub, page, &st) {
				if st.firstErr != nil {
					return fmt.Errorf("publish: %w", st.firstErr)
				}
				return ctx.Err()
			}
			if len(page) < batch {
				break
			}
			last := page[len(page)-1]
			afterTxid, afterID = last.txid, last.id
		}
		prev = cur
		if read > 0 {
			onBatch(outbox.BatchReport{Read: read, Sent: int(st.confirmed.Load()), BatchSize: batch})
			if !sleepFor(ctx, snapshotGather) {
				return ctx.Err()
			}
			continue
		}
		poll.Reset(snapshotMaxPoll)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-poll.C:
		}
	}
}
