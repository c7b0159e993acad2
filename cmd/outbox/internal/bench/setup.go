package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/store"
)

// bench is one run: its database, destination and the names of what it
// created.
type bench struct {
	o      *options
	dest   *destination
	stderr io.Writer
	log    *slog.Logger

	db   *dburl.DB
	d    store.Dialect
	st   *store.Store
	q    store.Querier // the pool, outside any transaction
	conn conn
	// relayConn is what the relays run over: conn, or (steady on
	// PostgreSQL) a pool of their own, relayDB (see openRelayPool).
	relayConn conn
	relayDB   *dburl.DB

	runID   string // random run id
	prefix  string // topic prefix of every message of the run, "outbox-bench.<run>."
	table   string // business table, set once created
	payload []byte

	migrated bool
	relayIDs []string
	// scratch: the database is the run's own and is dropped after it, so
	// close leaves the run's rows and business table to that.
	scratch bool

	// enqueuers are the producers of produce variants with a
	// configuration of their own, by variant (prepareEnqueuers).
	enqueuers map[string]enqueuer
	// claimDir is outbox+claim's blob directory; "" when it did not run.
	claimDir string

	brokerCleanup func()                                                           // removes what prepareBroker created; nil if nothing
	brokerHeld    func(context.Context) (int64, error)                             // counts what it holds; nil if it cannot
	brokerConsume func(context.Context, func(func(string) string)) (func(), error) // see brokerSetup.consume
	brokerWhat    string                                                           // names it
}

// maxConns is the pool size the workload needs: its clients, its relays
// (their workers, a lease loop and a LISTEN connection each) and some
// spare.
func (o *options) maxConns() int {
	workers := o.workers
	if workers == 0 {
		workers = outbox.DefaultWorkers
	}
	n := 4 + (workers+2)*o.relays
	switch o.workload {
	case wProduce:
		for _, c := range o.clientList {
			n = max(n, c+4)
		}
	case wSteady, wSustain:
		n += o.clientList[0]
	case wDrain, wCeiling:
		n += prefillWorkers
	}
	return n
}

// workersOrDefault is --workers, or the relay's default.
func (o *options) workersOrDefault() int {
	if o.workers == 0 {
		return outbox.DefaultWorkers
	}
	return o.workers
}

// batchSizeOrDefault is --batch-size, or the relay's default.
func (o *options) batchSizeOrDefault() int {
	if o.batchSize == 0 {
		return outbox.DefaultBatchSize
	}
	return o.batchSize
}

// withPoolSize sets pgx's pool_max_conns in a PostgreSQL URL, keeping a
// larger value the user gave.
func withPoolSize(raw string, n int) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	if have, err := strconv.Atoi(q.Get("pool_max_conns")); err == nil && have >= n {
		return raw
	}
	q.Set("pool_max_conns", strconv.Itoa(n))
	u.RawQuery = q.Encode()
	return u.String()
}

// open connects to the database and prepares the run; nothing is written
// yet. The publish workload has no database: it only prepares the
// destination.
func open(ctx context.Context, o *options, dest *destination, stderr io.Writer) (*bench, error) {
	b := &bench{
		o:       o,
		dest:    dest,
		stderr:  stderr,
		log:     slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		payload: makePayload(o.payloadBytes),
	}
	b.runID = newRunID()
	b.prefix = "outbox-bench." + b.runID + "."

	if o.workload == wPublish {
		if !o.sink {
			bs, err := prepareBroker(ctx, o.to, b.prefix, b.runID, []string{b.topic("publish")})
			if err != nil {
				return nil, err
			}
			b.brokerCleanup, b.brokerHeld, b.brokerWhat = bs.remove, bs.held, bs.what
		}
		return b, nil
	}

	d, _, err := dburl.Parse(o.dbURL)
	if err != nil {
		return nil, err
	}
	raw := o.dbURL
	if d == store.Postgres {
		raw = withAppName(withPoolSize(raw, o.maxConns()), b.producerAppName())
	}
	db, err := dburl.Open(ctx, raw)
	if err != nil {
		return nil, err
	}
	b.db, b.d = db, d
	b.st = db.Backend().Store
	b.q = b.st.DB()
	switch {
	case db.PGX != nil:
		b.conn, err = newPGConn(db.Pool, db.PGX)
	default:
		if d == store.MySQL {
			db.SQL.SetMaxOpenConns(max(16, o.maxConns()))
			db.SQL.SetMaxIdleConns(max(16, o.maxConns()))
		}
		b.conn, err = newSQLConn(db.SQL, db.Std)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	b.relayConn = b.conn
	if dest != nil && !o.sink {
		bs, err := prepareBroker(ctx, o.to, b.prefix, b.runID, []string{b.topic("drain"), b.topic("steady")})
		if err != nil {
			db.Close()
			return nil, err
		}
		b.brokerCleanup, b.brokerConsume = bs.remove, bs.consume
	}
	if o.consume && b.brokerConsume == nil {
		if b.brokerCleanup != nil {
			b.brokerCleanup()
		}
		db.Close()
		return nil, usagef("%s: --consume needs a nats:// destination", o.workload)
	}
	return b, nil
}

// freshDatabase makes a database of a run's own named name: a new
// database on the PostgreSQL or MariaDB server of raw, or a new SQLite
// file in a new directory beside raw's file. It returns the new
// database's URL and the function that drops it again.
func freshDatabase(ctx context.Context, raw string, d store.Dialect, name string) (string, func() error, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", nil, err
	}
	if d == store.SQLite {
		p := u.Path
		if u.Host != "" {
			p = u.Host + u.Path // sqlite://relative.db
		}
		dir, err := os.MkdirTemp(filepath.Dir(p), "outbox-"+name+"-")
		if err != nil {
			return "", nil, err
		}
		return "sqlite://" + filepath.Join(dir, name+".db"), func() error { return os.RemoveAll(dir) }, nil
	}
	admin, err := dburl.Open(ctx, raw)
	if err != nil {
		return "", nil, err
	}
	exec := func(ctx context.Context, q string) error {
		if admin.Pool != nil {
			_, err := admin.Pool.Exec(ctx, q)
			return err
		}
		_, err := admin.SQL.ExecContext(ctx, q)
		return err
	}
	if err := exec(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	drop := "DROP DATABASE " + name
	if d == store.Postgres {
		drop += " WITH (FORCE)"
	}
	u.Path = "/" + name
	// A new database has only the default schema: the search path of
	// raw's names one in raw's database.
	q := u.Query()
	q.Del("search_path")
	u.RawQuery = q.Encode()
	return u.String(), func() error {
		defer admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := exec(ctx, drop); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	}, nil
}

// newRunID returns a random run id: eight hex digits.
func newRunID() string {
	rb := make([]byte, 4)
	_, _ = rand.Read(rb)
	return hex.EncodeToString(rb)
}

// topic is the run's topic for one purpose.
func (b *bench) topic(name string) string { return b.prefix + name }

// message is the i-th message of a topic.
func (b *bench) message(topic string, i int64) outbox.Message {
	m := outbox.Message{Topic: topic, Payload: b.payload}
	if b.o.keys > 0 {
		m.Key = "key-" + strconv.FormatInt(i%int64(b.o.keys), 10)
	}
	return m
}

// run migrates and runs the workload.
func (b *bench) run(ctx context.Context) (*result, error) {
	if b.o.workload == wPublish {
		res := newResult(b.o, b.d, b.dest)
		var err error
		res.Publish, err = b.publish(ctx)
		return res, err
	}
	if err := b.conn.migrate(ctx); err != nil {
		return nil, err
	}
	b.migrated = true
	if b.o.readPath == readPathSnapshot {
		if err := b.enableSnapshotRead(ctx); err != nil {
			return nil, err
		}
	}
	res := newResult(b.o, b.d, b.dest)
	var err error
	switch b.o.workload {
	case wProduce:
		res.Produce, err = b.produce(ctx)
	case wDrain:
		res.Drain, err = b.drain(ctx)
	case wSteady:
		res.Steady, err = b.steady(ctx)
	case wCeiling:
		res.Ceiling, err = b.ceiling(ctx)
	}
	return res, err
}

// newResult is the report of a run of o on a database of dialect d ("":
// none) to dest (nil: none), its figures still to come.
func newResult(o *options, d store.Dialect, dest *destination) *result {
	r := &result{
		Workload:   o.workload,
		Dialect:    string(d),
		StartedAt:  time.Now().UTC().Truncate(time.Second),
		GoMaxProcs: runtime.GOMAXPROCS(0),
		NumCPU:     runtime.NumCPU(),
		Settings: settings{
			PayloadBytes: o.payloadBytes,
			Keys:         o.keys,
		},
	}
	if d != "" {
		r.Database = dburl.Redact(o.dbURL)
	}
	if dest != nil {
		r.Destination = dest.name
	}
	if o.workload != wProduce && o.workload != wPublish {
		r.Settings.Relays = o.relays
		r.Settings.BatchSize = o.batchSize
		if r.Settings.BatchSize == 0 {
			r.Settings.BatchSize = outbox.DefaultBatchSize
		}
	}
	switch o.workload {
	case wProduce:
		r.Settings.Clients = o.clientList
		r.Settings.DurationSeconds = o.duration.Seconds()
	case wSteady:
		r.Settings.Clients = o.clientList
		r.Settings.DurationSeconds = o.duration.Seconds()
		r.Settings.WarmupSeconds = o.warmup.Seconds()
		r.Settings.Rate = o.rate
	case wSustain:
		r.Settings.Clients = o.clientList
		r.Settings.WarmupSeconds = o.warmup.Seconds()
		r.Settings.WindowSeconds = o.window.Seconds()
		r.Settings.StartRate = o.start
		r.Settings.MaxRate = o.maxRate
		r.Settings.Precision = o.precision
	case wDrain, wCeiling:
		r.Settings.Messages = o.messages
		r.Settings.SentRows = o.sentRows
	case wPublish:
		r.Settings.Messages = o.messages
		r.Settings.Workers = o.workersOrDefault()
		r.Settings.BatchSize = o.batchSizeOrDefault()
	}
	return r
}

// close removes everything the run created and closes the database. It
// runs even when the run was interrupted.
func (b *bench) close() error {
	if b.db == nil { // publish: no database
		if b.brokerCleanup != nil {
			b.brokerCleanup()
		}
		return nil
	}
	defer b.db.Close()
	if b.relayDB != nil {
		defer b.relayDB.Close()
	}
	if b.brokerCleanup != nil {
		defer b.brokerCleanup()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var errs []error
	for _, id := range b.relayIDs {
		// Relay.Run already did this on its way out; this covers a relay
		// that never got that far.
		if err := b.st.DropRelay(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("cleanup: release relay %s: %w", id, err))
		}
	}
	if b.migrated && !b.scratch {
		start := time.Now()
		n, err := b.q.Exec(ctx, "DELETE FROM outbox_messages WHERE topic LIKE "+b.ph(1), b.prefix+"%")
		if err != nil {
			errs = append(errs, fmt.Errorf("cleanup: delete the run's messages (topic %s*): %w", b.prefix, err))
		} else if n > 0 {
			fmt.Fprintf(b.stderr, "cleanup: deleted the run's %s outbox rows in %.1f s\n", commas(n), time.Since(start).Seconds())
		}
	}
	if b.table != "" && !b.scratch {
		if _, err := b.q.Exec(ctx, "DROP TABLE "+b.table); err != nil {
			errs = append(errs, fmt.Errorf("cleanup: drop table %s: %w", b.table, err))
		}
	}
	if b.claimDir != "" {
		if err := os.RemoveAll(b.claimDir); err != nil {
			errs = append(errs, fmt.Errorf("cleanup: remove the claim-check directory: %w", err))
		}
	}
	return errors.Join(errs...)
}

// write runs a statement that must run to its end (see detach).
func (b *bench) write(ctx context.Context, q string, args ...any) (int64, error) {
	ctx, cancel := detach(ctx)
	defer cancel()
	return b.q.Exec(ctx, q, args...)
}

// ph is the n-th placeholder of the dialect.
func (b *bench) ph(n int) string {
	if b.d == store.Postgres {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// count runs a query returning one integer.
func (b *bench) count(ctx context.Context, q string, args ...any) (int64, error) {
	return store.QueryInt64(ctx, b.q, q, args...)
}

// countStatus counts the messages of topic in status.
func (b *bench) countStatus(ctx context.Context, topic, status string) (int64, error) {
	return b.count(ctx, "SELECT count(*) FROM outbox_messages WHERE topic = "+b.ph(1)+" AND "+b.statusColumn()+" = "+b.ph(2), topic, status)
}

// createTable creates the run's business table.
func (b *bench) createTable(ctx context.Context) error {
	name := "outbox_bench_orders_" + b.runID
	var ddl string
	switch b.d {
	case store.Postgres:
		ddl = "CREATE TABLE " + name + " (id BIGSERIAL PRIMARY KEY, payload TEXT NOT NULL)"
	case store.MySQL:
		// MEDIUMTEXT: TEXT holds 64 KiB, --payload-bytes goes to 1 MiB.
		ddl = "CREATE TABLE " + name + " (id BIGINT AUTO_INCREMENT PRIMARY KEY, payload MEDIUMTEXT NOT NULL) ENGINE=InnoDB"
	default:
		ddl = "CREATE TABLE " + name + " (id INTEGER PRIMARY KEY AUTOINCREMENT, payload TEXT NOT NULL)"
	}
	if _, err := b.write(ctx, ddl); err != nil {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	b.table = name
	return nil
}

// insertSQL inserts one business row.
func (b *bench) insertSQL() string {
	return "INSERT INTO " + b.table + " (payload) VALUES (" + b.ph(1) + ")"
}

// emptyTable removes the business rows between produce variants.
func (b *bench) emptyTable(ctx context.Context) error {
	q := "TRUNCATE TABLE " + b.table
	if b.d == store.SQLite {
		q = "DELETE FROM " + b.table
	}
	_, err := b.write(ctx, q)
	return err
}

// liveRelaysSQL lists relays that sent a heartbeat in the last 15 s.
func (b *bench) liveRelaysSQL() string {
	switch b.d {
	case store.Postgres:
		return "SELECT relay_id FROM outbox_relays WHERE seen_at > now() - interval '15 seconds' ORDER BY relay_id"
	case store.MySQL:
		return "SELECT relay_id FROM outbox_relays WHERE seen_at > NOW(6) - INTERVAL 15 SECOND ORDER BY relay_id"
	default:
		return "SELECT relay_id FROM outbox_relays WHERE seen_at > strftime('%Y-%m-%d %H:%M:%f', 'now', '-15 seconds') ORDER BY relay_id"
	}
}

// checkAlone refuses to run when a relay of another process is live (it
// would share partitions with the bench's relays and publish the bench's
// messages to real destinations) and, when the bench runs relays itself,
// when other messages are pending (its relays would take them).
func (b *bench) checkAlone(ctx context.Context, runsRelays bool) error {
	rows, err := b.q.Query(ctx, b.liveRelaysSQL())
	if err != nil {
		return fmt.Errorf("check for live relays: %w", err)
	}
	var live []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		live = append(live, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(live) > 0 {
		if len(live) > 3 {
			live = append(live[:3], "…")
		}
		return fmt.Errorf("a relay is running on this database (%s): it would deliver the bench's messages and share partitions with its relays; stop it or bench another database", strings.Join(live, ", "))
	}
	if !runsRelays {
		return nil
	}
	n, err := b.count(ctx, "SELECT count(*) FROM outbox_messages WHERE status = 'pending' AND topic NOT LIKE "+b.ph(1), b.prefix+"%")
	if err != nil {
		return fmt.Errorf("count pending messages: %w", err)
	}
	if n > 0 {
		return fmt.Errorf("%s pending messages on this database are not the bench's; its relays would take their partitions: bench an idle database (leftovers of an interrupted bench have topics 'outbox-bench.*')", commas(n))
	}
	return nil
}

// relaySet is the bench's relays running in this process.
type relaySet struct {
	cancel context.CancelFunc
	done   chan error
	n      int

	stopOnce sync.Once
	stopErr  error
	// failed receives the first error a relay's Run returned early with.
	failed chan error
}

// startRelays starts the configured number of relays routing the run's
// topics to pub and holding back any other topic.
func (b *bench) startRelays(ctx context.Context, pub outbox.Publisher, onBatch func(outbox.BatchReport)) (*relaySet, error) {
	rctx, cancel := context.WithCancel(ctx)
	rs := &relaySet{cancel: cancel, done: make(chan error, b.o.relays), failed: make(chan error, 1)}
	for i := range b.o.relays {
		id := fmt.Sprintf("outbox-bench-%s-%d", b.runID, i+1)
		r, err := b.relayConn.newRelay(&outbox.RelayConfig{
			Routes: []outbox.Route{
				{Pattern: b.prefix + ">", Publisher: pub, Name: "bench"},
				{Pattern: "*", Publisher: holdPublisher{}, Name: "not-bench"},
			},
			ID:           id,
			Logger:       b.log,
			BatchSize:    b.o.batchSize,
			Workers:      b.o.workers,
			OnBatch:      onBatch,
			SnapshotRead: b.o.readPath == readPathSnapshot,
		})
		if err != nil {
			_ = rs.stop()
			return nil, err
		}
		b.relayIDs = append(b.relayIDs, id)
		rs.n++
		go func() {
			err := r.Run(rctx)
			if err != nil {
				select {
				case rs.failed <- err:
				default:
				}
			}
			rs.done <- err
		}()
	}
	return rs, nil
}

// stop cancels the relays and waits for them to finish their batches and
// release their partitions. It may be called more than once.
func (rs *relaySet) stop() error {
	rs.stopOnce.Do(func() {
		rs.cancel()
		for range rs.n {
			if err := <-rs.done; err != nil && rs.stopErr == nil {
				rs.stopErr = err
			}
		}
	})
	return rs.stopErr
}

// makePayload returns a JSON order of n bytes (a bare padded object when n
// is too small for one).
func makePayload(n int) []byte {
	const order = `{"order_id":123456,"customer_id":"cus_8f14e45fceea167a","currency":"EUR","total":"129.90",` +
		`"items":[{"sku":"SKU-1001","qty":2,"price":"39.95"},{"sku":"SKU-2002","qty":1,"price":"50.00"}],"note":""}`
	switch {
	case n >= len(order):
		return []byte(order[:len(order)-2] + strings.Repeat("x", n-len(order)) + `"}`)
	case n >= 8:
		return []byte(`{"p":"` + strings.Repeat("x", n-8) + `"}`)
	default:
		return []byte("{}" + strings.Repeat(" ", max(n-2, 0)))
	}
}
