package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
)

// Pre-fill shape: EnqueueMany in transactions of prefillChunk messages,
// prefillWorkers at a time (one on SQLite, which has one writer).
const (
	prefillChunk   = 1000
	prefillWorkers = 4
	sentRowsChunk  = 100000
)

// drainResult holds the figures of drain and ceiling.
type drainResult struct {
	Messages int `json:"messages"`
	// ReadPath is "snapshot" for drain --read-path snapshot, whose
	// delivered rows are verified sent by their partitions' cursors.
	ReadPath string `json:"read_path,omitempty"`
	// Delivered counts the Sent outcomes the relays reported.
	Delivered int64 `json:"delivered"`
	// VerifiedSent counts the run's rows in status sent afterwards.
	VerifiedSent int64 `json:"verified_sent"`
	runCost
	PrefillSeconds   float64 `json:"prefill_seconds"`
	PrefillPerSecond float64 `json:"prefill_messages_per_second"`
	SentRowsSeconds  float64 `json:"sent_rows_seconds"`
	// Analyzed: ANALYZE ran between the pre-fill and the timed part.
	Analyzed       bool       `json:"analyzed"`
	AnalyzeSeconds float64    `json:"analyze_seconds,omitempty"`
	Batches        batchStats `json:"batches"`
	SinkRequests   int64      `json:"sink_requests,omitempty"`
}

// batchStats sums the relays' BatchReports.
type batchStats struct {
	Rounds       int64   `json:"rounds"`
	MeanRead     float64 `json:"mean_read"`
	MaxRead      int     `json:"max_read"`
	MaxBatchSize int     `json:"max_batch_size"`
	Sent         int64   `json:"sent"`
	Retried      int64   `json:"retried"`
	Dead         int64   `json:"dead"`
	Deferred     int64   `json:"deferred"`
	Skipped      int64   `json:"skipped"`
	read         int64
}

type batchCollector struct {
	mu sync.Mutex
	s  batchStats
}

func (c *batchCollector) add(r outbox.BatchReport) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &c.s
	s.Rounds++
	s.read += int64(r.Read)
	s.MaxRead = max(s.MaxRead, r.Read)
	s.MaxBatchSize = max(s.MaxBatchSize, r.BatchSize)
	s.Sent += int64(r.Sent)
	s.Retried += int64(r.Retried)
	s.Dead += int64(r.Dead)
	s.Deferred += int64(r.Deferred)
	s.Skipped += int64(r.Skipped)
}

func (c *batchCollector) snapshot() batchStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.s
	if s.Rounds > 0 {
		s.MeanRead = float64(s.read) / float64(s.Rounds)
	}
	return s
}

// prefill enqueues n messages of topic in transactions of prefillChunk,
// printing progress as label.
func (b *bench) prefill(ctx context.Context, label, topic string, n int) error {
	workers := prefillWorkers
	if b.d == store.SQLite {
		workers = 1
	}
	chunks := (n + prefillChunk - 1) / prefillChunk
	var next, done atomic.Int64
	errc := make(chan error, workers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msgs := make([]outbox.Message, 0, prefillChunk)
			for {
				c := next.Add(1) - 1
				if c >= int64(chunks) || ctx.Err() != nil {
					return
				}
				lo := c * prefillChunk
				hi := min(lo+prefillChunk, int64(n))
				msgs = msgs[:0]
				for i := lo; i < hi; i++ {
					msgs = append(msgs, b.message(topic, i))
				}
				err := b.conn.inTx(ctx, func(ctx context.Context, tx txn) error {
					_, err := tx.enqueue(ctx, false, msgs)
					return err
				})
				if err != nil {
					errc <- fmt.Errorf("%s: %w", label, err)
					cancel()
					return
				}
				done.Add(hi - lo)
			}
		}()
	}
	stop := b.every(func(time.Duration) string {
		return fmt.Sprintf("%s: %s/%s messages", label, commas(done.Load()), commas(int64(n)))
	})
	wg.Wait()
	stop()
	select {
	case err := <-errc:
		return err
	default:
		return ctx.Err()
	}
}

// loadSent adds n rows of topic that are already sent: the history a busy
// outbox table carries.
func (b *bench) loadSent(ctx context.Context, topic string, n int) error {
	if b.d == store.MySQL {
		return b.loadSentMySQL(ctx, topic, n)
	}
	if b.d == store.SQLite {
		// SQLite updates rows and index entries in place: pending rows
		// turned sent leave nothing behind for the drain to step over.
		if err := b.prefill(ctx, "sent rows", topic, n); err != nil {
			return err
		}
		_, err := b.write(ctx, "UPDATE outbox_messages SET status = 'sent', attempts = 1, sent_at = strftime('%Y-%m-%d %H:%M:%f', 'now')"+
			" WHERE topic = ? AND status = 'pending'", topic)
		return err
	}
	// $4 is the key count; NULLIF keeps the statement valid with no keys.
	key := "'key-' || (g % $4)"
	if b.o.keys == 0 {
		key = "NULLIF($4::bigint, $4::bigint)::text"
	}
	q := `INSERT INTO outbox_messages (topic, business_key, payload, status, attempts, sent_at)
SELECT $1, ` + key + `, $2, 'sent', 1, now() FROM generate_series($3::bigint, $3::bigint + $5::bigint - 1) AS g`
	return b.insertSent(ctx, n, func(lo, size int) (string, []any) {
		return q, []any{topic, string(b.payload), int64(lo), int64(max(b.o.keys, 1)), int64(size)}
	})
}

// insertSent inserts n sent rows in chunks, showing progress; stmt gives
// the statement and arguments that insert rows lo to lo+size-1.
func (b *bench) insertSent(ctx context.Context, n int, stmt func(lo, size int) (string, []any)) error {
	var done atomic.Int64
	stop := b.every(func(time.Duration) string {
		return fmt.Sprintf("sent rows: %s/%s", commas(done.Load()), commas(int64(n)))
	})
	defer stop()
	for lo := 0; lo < n; lo += sentRowsChunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		size := min(sentRowsChunk, n-lo)
		q, args := stmt(lo, size)
		if _, err := b.write(ctx, q, args...); err != nil {
			return fmt.Errorf("sent rows: %w", err)
		}
		done.Add(int64(size))
	}
	return nil
}

// loadSentMySQL inserts the sent rows as sent. Enqueued and then updated
// in one statement, they would leave a million delete-marked entries in
// the pending-rows index that InnoDB purges only later — while the drain
// steps over each of them — which no table that reached its size by
// deliveries carries.
func (b *bench) loadSentMySQL(ctx context.Context, topic string, n int) error {
	key := "CONCAT('key-', g.n % ?)"
	if b.o.keys == 0 {
		key = "NULLIF(?, ?)"
	}
	q := `INSERT INTO outbox_messages (topic, business_key, payload, status, attempts, sent_at)
SELECT ?, ` + key + `, ?, 'sent', 1, NOW(6) FROM JSON_TABLE(?, '$[*]' COLUMNS (n BIGINT PATH '$')) AS g`
	return b.insertSent(ctx, n, func(lo, size int) (string, []any) {
		nums := make([]byte, 0, size*8)
		nums = append(nums, '[')
		for i := range size {
			if i > 0 {
				nums = append(nums, ',')
			}
			nums = strconv.AppendInt(nums, int64(lo+i), 10)
		}
		nums = append(nums, ']')
		args := []any{topic, int64(max(b.o.keys, 1))}
		if b.o.keys == 0 {
			args = append(args, int64(1))
		}
		return q, append(args, string(b.payload), string(nums))
	})
}

// prepareBacklog loads the sent rows and the messages to drain.
func (b *bench) prepareBacklog(ctx context.Context, res *drainResult, topic string) error {
	if err := b.checkAlone(ctx, true); err != nil {
		return err
	}
	if b.o.sentRows > 0 {
		t := time.Now()
		if err := b.loadSent(ctx, b.topic("sent"), b.o.sentRows); err != nil {
			return err
		}
		res.SentRowsSeconds = time.Since(t).Seconds()
	}
	t := time.Now()
	if err := b.prefill(ctx, "prefill", topic, b.o.messages); err != nil {
		return err
	}
	res.PrefillSeconds = time.Since(t).Seconds()
	res.PrefillPerSecond = float64(b.o.messages) / res.PrefillSeconds
	if b.o.analyze && b.d == store.Postgres {
		// A freshly filled table has statistics from when it was empty:
		// the planner then sorts every pending row on each read until
		// autovacuum analyzes it.
		t := time.Now()
		if _, err := b.q.Exec(ctx, "ANALYZE outbox_messages"); err != nil {
			return fmt.Errorf("analyze: %w", err)
		}
		res.Analyzed = true
		res.AnalyzeSeconds = time.Since(t).Seconds()
	}
	runtime.GC()
	return nil
}

// drain times the relays delivering a pre-filled backlog.
func (b *bench) drain(ctx context.Context) (*drainResult, error) {
	res := &drainResult{Messages: b.o.messages, ReadPath: b.o.readPath}
	topic := b.topic("drain")
	if err := b.prepareBacklog(ctx, res, topic); err != nil {
		return nil, err
	}

	target := int64(b.o.messages)
	var delivered, endNanos atomic.Int64
	var stats batchCollector
	done := make(chan struct{})
	var once sync.Once
	onBatch := func(r outbox.BatchReport) {
		stats.add(r)
		if delivered.Add(int64(r.Sent)) >= target {
			once.Do(func() {
				endNanos.Store(time.Now().UnixNano())
				close(done)
			})
		}
	}

	m0 := sampleMachine()
	cpu0 := cpuTime()
	start := time.Now()
	rs, err := b.startRelays(ctx, b.dest.pub, onBatch)
	if err != nil {
		return nil, err
	}
	waitErr := b.waitDelivered(ctx, rs, done, &delivered, target, start, "drain", &stats)
	cpu := cpuTime() - cpu0
	res.Machine = cpuSince(m0)
	if err := rs.stop(); err != nil && waitErr == nil {
		waitErr = err
	}
	if waitErr != nil {
		return nil, waitErr
	}
	end := time.Unix(0, endNanos.Load())
	res.Delivered = delivered.Load()
	res.measure(res.Delivered, end.Sub(start), cpu)
	res.Batches = stats.snapshot()
	if b.dest.sink != nil {
		res.SinkRequests = b.dest.sink.requests.Load()
	}
	res.VerifiedSent, err = b.countStatus(ctx, topic, store.StatusSent)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	if res.VerifiedSent != target {
		return nil, fmt.Errorf("verify: %s of %s messages are sent after the relays reported %s delivered", commas(res.VerifiedSent), commas(target), commas(res.Delivered))
	}
	return res, nil
}

// waitDelivered waits until done closes, printing progress every second.
// It fails when a relay stops, when nothing was delivered for the stall
// timeout, or when ctx ends.
func (b *bench) waitDelivered(ctx context.Context, rs *relaySet, done <-chan struct{}, delivered *atomic.Int64, target int64, start time.Time, label string, stats *batchCollector) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, lastChange := int64(0), time.Now()
	for {
		select {
		case <-done:
			return nil
		case err := <-rs.failed:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case now := <-tick.C:
			n := delivered.Load()
			fmt.Fprintf(b.stderr, "%s: %s/%s delivered, %s msg/s\n", label, commas(n), commas(target), commas(n-last))
			if n != last {
				last, lastChange = n, now
			} else if now.Sub(lastChange) >= b.o.stall {
				s := stats.snapshot()
				return fmt.Errorf("%s: stalled: nothing delivered for %s (%s of %s; retried %d, dead %d, deferred %d; see the relay warnings above)",
					label, b.o.stall, commas(n), commas(target), s.Retried, s.Dead, s.Deferred)
			}
		}
	}
}

// ceiling reads and settles the backlog through the store with no
// publishing, in as many concurrent loops as the relays have workers: the
// most a relay could do on this database.
func (b *bench) ceiling(ctx context.Context) (*drainResult, error) {
	res := &drainResult{Messages: b.o.messages}
	topic := b.topic("ceiling")
	if err := b.prepareBacklog(ctx, res, topic); err != nil {
		return nil, err
	}
	parts, err := b.st.Partitions(ctx)
	if err != nil {
		return nil, fmt.Errorf("ceiling: %w (has the schema been migrated?)", err)
	}
	batch := b.o.batchSize
	if batch == 0 {
		batch = outbox.DefaultBatchSize
	}
	// As many concurrent read-settle loops as the relays would run, over
	// disjoint partition shares.
	perRelay := b.o.workers
	if perRelay == 0 {
		perRelay = outbox.DefaultWorkers
	}
	workers := min(b.o.relays*perRelay, parts)
	const ttl = time.Minute
	var settled atomic.Int64
	var stats batchCollector
	errc := make(chan error, workers)
	m0 := sampleMachine()
	cpu0 := cpuTime()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		owner := fmt.Sprintf("outbox-bench-%s-c%d", b.runID, w+1)
		b.relayIDs = append(b.relayIDs, owner)
		var mine []int
		for p := w; p < parts; p += workers {
			mine = append(mine, p)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.settleAll(ctx, owner, mine, batch, ttl, &settled, &stats); err != nil {
				errc <- err
			}
		}()
	}
	stop := b.every(func(time.Duration) string {
		return fmt.Sprintf("ceiling: %s/%s settled", commas(settled.Load()), commas(int64(b.o.messages)))
	})
	wg.Wait()
	stop()
	wall := time.Since(start)
	cpu := cpuTime() - cpu0
	res.Machine = cpuSince(m0)
	select {
	case err := <-errc:
		return nil, err
	default:
	}
	res.Delivered = settled.Load()
	res.measure(res.Delivered, wall, cpu)
	res.Batches = stats.snapshot()
	res.VerifiedSent, err = b.countStatus(ctx, topic, store.StatusSent)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	if res.VerifiedSent != int64(b.o.messages) {
		return nil, fmt.Errorf("verify: %s of %s messages are sent", commas(res.VerifiedSent), commas(int64(b.o.messages)))
	}
	return res, nil
}

// settleAll leases parts for owner and settles every ready row of the run
// in them as sent, until a read finds none.
func (b *bench) settleAll(ctx context.Context, owner string, parts []int, batch int, ttl time.Duration, settled *atomic.Int64, stats *batchCollector) error {
	held, err := b.st.Acquire(ctx, owner, parts, ttl)
	if err != nil {
		return fmt.Errorf("ceiling: lease partitions: %w", err)
	}
	if len(held) != len(parts) {
		return errors.New("ceiling: some partitions are leased by another relay; bench an idle database")
	}
	renewed := time.Now()
	outs := make([]store.Outcome, 0, batch)
	for ctx.Err() == nil {
		if time.Since(renewed) > ttl/4 {
			if _, err := b.st.Renew(ctx, owner, ttl); err != nil {
				return fmt.Errorf("ceiling: renew leases: %w", err)
			}
			renewed = time.Now()
		}
		rows, err := b.st.Read(ctx, parts, batch)
		if err != nil {
			return fmt.Errorf("ceiling: read: %w", err)
		}
		outs = outs[:0]
		for _, r := range rows {
			if len(r.Topic) > len(b.prefix) && r.Topic[:len(b.prefix)] == b.prefix {
				outs = append(outs, store.Outcome{ID: r.ID, Status: store.StatusSent, CountAttempt: true, Partition: r.Partition})
			}
		}
		if len(outs) == 0 {
			return nil // drained (or only others' messages left: not ours to touch)
		}
		n, err := b.st.Settle(ctx, owner, outs)
		if err != nil {
			return fmt.Errorf("ceiling: settle: %w", err)
		}
		settled.Add(n)
		stats.add(outbox.BatchReport{Read: len(rows), Sent: len(outs), Settled: n, BatchSize: batch})
	}
	return ctx.Err()
}
