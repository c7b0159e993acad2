package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/adopt/adoptstore"
	"github.com/txoutbox/outbox/internal/adopt/adoptyaml"
	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/store"
)

// The wake workload: how soon a relay that has been idle finds a message
// that nothing signals (plain SQL from another language, an adopted
// table's application), and what its idleness costs.
//
// It makes a fresh database (a new database on the PostgreSQL or MariaDB
// server of --db, a new SQLite file), starts `outbox relay` as its own
// process delivering to a webhook in this one, measures the relay's and
// the server's CPU while nothing is written, then commits one message at
// a time on its own connection, each after a random pause, and times each
// from its commit to its arrival at the webhook. --outbox runs another
// build of the relay (an older one, to compare).

const wWake = "wake"

type wakeOptions struct {
	dbURL    string
	bin      string
	messages int
	gapMin   time.Duration
	gapMax   time.Duration
	idle     time.Duration
	adopt    string
	adoptSQL bool
	producer string
	seed     uint64
	json     bool
	extra    []string
}

func wakeFlags(o *wakeOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("outbox bench "+wWake, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.dbURL, "db", "", "the server (postgres://…, mysql://…) on which to make a fresh database, or sqlite:///DIR/any.db for a fresh file in DIR (default $OUTBOX_DATABASE_URL)")
	fs.StringVar(&o.bin, "outbox", "", "the outbox `PROGRAM` to run the relay with (default this one)")
	fs.IntVar(&o.messages, "messages", 40, "messages to write, one at a time")
	fs.DurationVar(&o.gapMin, "gap-min", 400*time.Millisecond, "shortest pause before each message")
	fs.DurationVar(&o.gapMax, "gap-max", 1600*time.Millisecond, "longest pause before each message")
	fs.DurationVar(&o.idle, "idle", 20*time.Second, "how long to measure the idle relay's and server's CPU before writing")
	fs.StringVar(&o.adopt, "adopt", "", "write to a built-in profile's table (laravel, spring, codes) and run the relay with --adopt PROFILE")
	fs.BoolVar(&o.adoptSQL, "adopt-sql", false, "with --adopt: apply what 'outbox adopt sql' prints to the table first (its indexes, and on PostgreSQL the trigger that wakes an idle relay)")
	fs.StringVar(&o.producer, "producer", "sql", "how messages are written: sql (a plain INSERT, as another language would) or go (the library's Producer, with its signal)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the pauses")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.Func("relay-flag", "a further flag of the relay, e.g. --relay-flag=--probe-interval=5ms (repeatable)", func(v string) error {
		o.extra = append(o.extra, v)
		return nil
	})
	return fs
}

// wakeResult is the wake workload's report.
type wakeResult struct {
	Database string `json:"database"`
	Table    string `json:"table"`
	AdoptSQL bool   `json:"adopt_sql,omitempty"`
	Producer string `json:"producer"`
	Relay    string `json:"relay"`
	Wake     string `json:"wake"`
	Idle     struct {
		Seconds float64 `json:"seconds"`
		// RelayCPUPercent is the relay process's CPU, in percent of one
		// core; ServerCPUPercent the database server's for it: the
		// relay's backends on PostgreSQL, the whole server's above what
		// it used before the relay started on MariaDB, none on SQLite.
		RelayCPUPercent  float64 `json:"relay_cpu_percent"`
		ServerCPUPercent float64 `json:"server_cpu_percent"`
		ServerCPUHow     string  `json:"server_cpu_how"`
	} `json:"idle"`
	Messages  int     `json:"messages"`
	Arrived   int     `json:"arrived"`
	P50Millis float64 `json:"p50_ms"`
	P99Millis float64 `json:"p99_ms"`
	MaxMillis float64 `json:"max_ms"`
	Load      string  `json:"load_average"`
}

// wakeRun is one run of the wake workload.
type wakeRun struct {
	o       *wakeOptions
	stderr  io.Writer
	dialect store.Dialect
	url     string // the fresh database
	drop    func()
	db      *dburl.DB
	relay   *exec.Cmd

	mu      sync.Mutex
	arrived map[int]time.Time
}

func runWake(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string, secrets *[]string) error {
	o := &wakeOptions{}
	if err := parseWorkload(wWake, wakeFlags(o), args, stdout); err != nil {
		return err
	}
	o.dbURL = databaseURL(o.dbURL, getenv, secrets)
	switch {
	case o.dbURL == "":
		return usagef("wake: no database: give --db URL or set OUTBOX_DATABASE_URL")
	case o.messages < 1 || o.gapMin < 0 || o.gapMax < o.gapMin || o.idle <= 0:
		return usagef("wake: want --messages of at least 1, 0 <= --gap-min <= --gap-max and a positive --idle")
	case o.producer != "sql" && o.producer != "go":
		return usagef("wake: --producer is sql or go")
	case o.adopt != "" && wakeTables[o.adopt] == nil:
		return usagef("wake: --adopt is laravel, spring or codes")
	case o.adoptSQL && o.adopt == "":
		return usagef("wake: --adopt-sql goes with --adopt")
	case o.adopt != "" && o.producer == "go":
		return usagef("wake: --producer go writes outbox_messages; leave out --adopt")
	}
	d, _, err := dburl.Parse(o.dbURL)
	if err != nil {
		return err
	}
	if o.bin == "" {
		if o.bin, err = os.Executable(); err != nil {
			return err
		}
	}
	w := &wakeRun{o: o, stderr: stderr, dialect: d, arrived: map[int]time.Time{}}
	defer w.cleanup()
	res, err := w.run(ctx)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(stdout, res)
	}
	with := ""
	if res.AdoptSQL {
		with = " with outbox adopt sql's DDL"
	}
	fmt.Fprintf(stdout, "wake: %s, table %s%s, producer %s, relay %s (%s)\n", res.Database, res.Table, with, res.Producer, res.Relay, res.Wake)
	fmt.Fprintf(stdout, "idle %.0fs: relay %.2f%% of a core, server %.2f%% (%s)\n", res.Idle.Seconds, res.Idle.RelayCPUPercent, res.Idle.ServerCPUPercent, res.Idle.ServerCPUHow)
	fmt.Fprintf(stdout, "commit → publish, %d/%d messages: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", res.Arrived, res.Messages, res.P50Millis, res.P99Millis, res.MaxMillis)
	fmt.Fprintf(stdout, "load average %s\n", res.Load)
	return nil
}

func (w *wakeRun) logf(format string, args ...any) {
	fmt.Fprintf(w.stderr, "wake: "+format+"\n", args...)
}

func (w *wakeRun) run(ctx context.Context) (*wakeResult, error) {
	o := w.o
	table, err := w.prepare(ctx)
	if err != nil {
		return nil, err
	}
	hook, stopHook, err := w.receiver()
	if err != nil {
		return nil, err
	}
	defer stopHook()

	var base float64
	server, how := w.serverCPU(ctx)
	if w.dialect == store.MySQL {
		// The whole server's CPU: what it spends without the relay first.
		w.logf("measuring the server without the relay for %s", o.idle)
		s0, t0 := server(), time.Now()
		if !sleepFor(ctx, o.idle) {
			return nil, ctx.Err()
		}
		base = (server() - s0) / time.Since(t0).Seconds()
	}
	if err := w.startRelay(ctx, hook); err != nil {
		return nil, err
	}
	res := &wakeResult{Database: string(w.dialect), Table: table, AdoptSQL: o.adoptSQL, Producer: o.producer, Relay: o.bin, Messages: o.messages, Wake: w.wakeOf(ctx)}
	res.Idle.ServerCPUHow = how
	w.logf("idle phase: %s", o.idle)
	load0 := loadAverage()
	r0, s0, t0 := pidCPU(w.relay.Process.Pid), server(), time.Now()
	if !sleepFor(ctx, o.idle) {
		return nil, ctx.Err()
	}
	el := time.Since(t0).Seconds()
	r1, s1 := pidCPU(w.relay.Process.Pid), server()
	res.Idle.Seconds = round1(el)
	res.Idle.RelayCPUPercent = round2(100 * (r1 - r0) / el)
	res.Idle.ServerCPUPercent = round2(100 * ((s1-s0)/el - base))

	if err := w.writeAndTime(ctx, table, res); err != nil {
		return nil, err
	}
	res.Load = load0 + " → " + loadAverage()
	return res, nil
}

// prepare makes the run's database, migrates it, opens it and, for an
// adopted profile, makes the application's table (with what `outbox adopt
// sql` prints, under --adopt-sql). It returns the table written to.
func (w *wakeRun) prepare(ctx context.Context) (string, error) {
	o := w.o
	if err := w.makeDatabase(ctx); err != nil {
		return "", err
	}
	if err := migrateURL(ctx, w.url); err != nil {
		return "", err
	}
	var err error
	if w.db, err = dburl.Open(ctx, w.url); err != nil {
		return "", err
	}
	if o.adopt == "" {
		return "outbox_messages", nil
	}
	table := wakeTables[o.adopt].name
	ddl := wakeTables[o.adopt].ddl(w.dialect)
	if o.adoptSQL {
		p, err := adoptyaml.Load(o.adopt)
		if err != nil {
			return "", err
		}
		ddl += ";\n" + adoptstore.SQL(w.dialect, p, nil)
	}
	for stmt := range strings.SplitSeq(ddl, ";\n") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if _, err := w.exec(ctx, stmt); err != nil {
			return "", fmt.Errorf("creating %s: %w", table, err)
		}
	}
	return table, nil
}

// startRelay starts the relay process delivering to hook and waits until
// its polls have backed off to their longest.
func (w *wakeRun) startRelay(ctx context.Context, hook string) error {
	o := w.o
	metrics, err := freeAddr()
	if err != nil {
		return err
	}
	args := []string{"relay", "--db", w.url, "--to", hook, "--metrics", metrics, "--log-level", "warn"}
	if o.adopt != "" {
		args = append(args, "--adopt", o.adopt)
	}
	w.relay = exec.CommandContext(ctx, o.bin, append(args, o.extra...)...)
	w.relay.Stderr = w.stderr
	if err := w.relay.Start(); err != nil {
		return err
	}
	if err := waitReady(ctx, metrics); err != nil {
		return err
	}
	// Past the relay's first reads, its polls backed off to their longest.
	if !sleepFor(ctx, 3*time.Second) {
		return ctx.Err()
	}
	return nil
}

// writeAndTime writes the messages one at a time, the seeded pauses
// apart, waits for them to arrive (10 s at most) and puts the commit →
// arrival latencies in res.
func (w *wakeRun) writeAndTime(ctx context.Context, table string, res *wakeResult) error {
	o := w.o
	w.logf("writing %d messages, %s–%s apart", o.messages, o.gapMin, o.gapMax)
	write, err := w.writer(table)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(o.seed, 0))
	committed := make([]time.Time, o.messages)
	for i := range o.messages {
		gap := o.gapMin + time.Duration(rng.Int64N(int64(o.gapMax-o.gapMin)+1))
		if !sleepFor(ctx, gap) {
			return ctx.Err()
		}
		if err := write(ctx, i); err != nil {
			return fmt.Errorf("writing message %d: %w", i, err)
		}
		committed[i] = time.Now()
	}
	deadline := time.Now().Add(10 * time.Second)
	for w.count() < o.messages && time.Now().Before(deadline) {
		if !sleepFor(ctx, 20*time.Millisecond) {
			return ctx.Err()
		}
	}
	w.mu.Lock()
	var lat []time.Duration
	for i, c := range committed {
		if a, ok := w.arrived[i]; ok {
			lat = append(lat, max(a.Sub(c), 0))
		}
	}
	w.mu.Unlock()
	slices.Sort(lat)
	res.Arrived = len(lat)
	if len(lat) > 0 {
		res.P50Millis = ms(lat[len(lat)/2])
		res.P99Millis = ms(lat[min(len(lat)-1, len(lat)*99/100)])
		res.MaxMillis = ms(lat[len(lat)-1])
	}
	return nil
}

// makeDatabase makes the run's fresh database and sets w.url.
func (w *wakeRun) makeDatabase(ctx context.Context) error {
	name := fmt.Sprintf("bench_wake_%d", time.Now().UnixNano()%1_000_000_000)
	u, drop, err := freshDatabase(ctx, w.o.dbURL, w.dialect, name)
	if err != nil {
		return err
	}
	w.url = u
	w.drop = func() {
		if err := drop(); err != nil {
			w.logf("%v", err)
		}
	}
	return nil
}

func (w *wakeRun) exec(ctx context.Context, q string, args ...any) (int64, error) {
	if w.db.Pool != nil {
		tag, err := w.db.Pool.Exec(ctx, q, args...)
		return tag.RowsAffected(), err
	}
	res, err := w.db.SQL.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// writer returns the function that commits message seq.
func (w *wakeRun) writer(table string) (func(ctx context.Context, seq int) error, error) {
	payload := func(seq int) string { return fmt.Sprintf(`{"seq":%d,"bench":"wake"}`, seq) }
	ph := func(q string) string { return store.Bind(w.dialect, q) }
	switch {
	case w.o.producer == "go" && w.db.PGX != nil:
		p, err := outbox.NewProducer(w.db.PGX, nil)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, seq int) error {
			tx, err := w.db.Pool.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := p.Enqueue(ctx, tx, outbox.Message{Topic: "bench.wake", Key: "k", Payload: []byte(payload(seq))}); err != nil {
				_ = tx.Rollback(ctx)
				return err
			}
			return tx.Commit(ctx)
		}, nil
	case w.o.producer == "go":
		p, err := outbox.NewProducer(w.db.Std, nil)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, seq int) error {
			tx, err := w.db.SQL.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if _, err := p.Enqueue(ctx, tx, outbox.Message{Topic: "bench.wake", Key: "k", Payload: []byte(payload(seq))}); err != nil {
				_ = tx.Rollback()
				return err
			}
			return tx.Commit()
		}, nil
	case w.o.adopt != "":
		t := wakeTables[w.o.adopt]
		q := ph(t.insert(w.dialect))
		return func(ctx context.Context, seq int) error {
			_, err := w.exec(ctx, q, t.args(seq, payload(seq))...)
			return err
		}, nil
	}
	q := ph("INSERT INTO " + table + " (topic, business_key, payload) VALUES ('bench.wake', 'k', ?)")
	return func(ctx context.Context, seq int) error {
		_, err := w.exec(ctx, q, payload(seq))
		return err
	}, nil
}

// receiver serves the webhook the relay delivers to and records when
// each message (its payload's seq) first arrived.
func (w *wakeRun) receiver() (string, func(), error) {
	return serveHooks(func(rw http.ResponseWriter, r *http.Request) {
		now := time.Now()
		var body struct {
			Seq *int `json:"seq"`
		}
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &body) == nil && body.Seq != nil {
			w.mu.Lock()
			if _, ok := w.arrived[*body.Seq]; !ok {
				w.arrived[*body.Seq] = now
			}
			w.mu.Unlock()
		}
		rw.WriteHeader(http.StatusNoContent)
	})
}

func (w *wakeRun) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.arrived)
}

// serverCPU returns a function that samples the database server's CPU
// seconds for the relay, and how it is counted.
func (w *wakeRun) serverCPU(ctx context.Context) (func() float64, string) {
	switch w.dialect {
	case store.Postgres:
		// The run's database serves only the relay and this writer
		// (idle meanwhile): the backends connected to it.
		return func() float64 {
			rows, err := w.db.Pool.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
			if err != nil {
				return 0
			}
			defer rows.Close()
			sum := 0.0
			for rows.Next() {
				var pid int
				if rows.Scan(&pid) == nil {
					sum += pidCPU(pid)
				}
			}
			return sum
		}, "the PostgreSQL backends of the run's database (the relay's; the writer's is idle)"
	case store.MySQL:
		var file string
		if err := w.db.SQL.QueryRowContext(ctx, "SELECT @@pid_file").Scan(&file); err == nil {
			if b, err := os.ReadFile(file); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					return func() float64 { return pidCPU(pid) },
						"the whole MariaDB server, less what it used before the relay started (other clients of the server count: noisy)"
				}
			}
		}
		return func() float64 { return 0 }, "not measured (the server's process is not readable here)"
	}
	return func() float64 { return 0 }, "none: SQLite runs in the relay's process"
}

// wakeOf is the relay's wake-up as it recorded it beside its registration
// (an adopted table's relay registers there too).
func (w *wakeRun) wakeOf(ctx context.Context) string {
	q := "SELECT COALESCE(MAX(wake), '') FROM outbox_relays"
	var s string
	var err error
	if w.db.Pool != nil {
		err = w.db.Pool.QueryRow(ctx, q).Scan(&s)
	} else {
		err = w.db.SQL.QueryRowContext(ctx, q).Scan(&s)
	}
	if err != nil || s == "" {
		return "not recorded (a relay from before schema version 18)"
	}
	return s
}

func (w *wakeRun) cleanup() {
	if w.relay != nil && w.relay.Process != nil {
		_ = w.relay.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = w.relay.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = w.relay.Process.Kill()
			<-done
		}
	}
	if w.db != nil {
		w.db.Close()
	}
	if w.drop != nil {
		w.drop()
	}
}

// waitReady waits until the relay's /readyz answers 200.
func waitReady(ctx context.Context, addr string) error {
	c := http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		res, err := c.Get("http://" + addr + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !sleepFor(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
	return errors.New("the relay was not ready within a minute")
}

func sleepFor(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// pidCPU is process pid's user plus system CPU in seconds (0 when it
// cannot be read: another platform, a process gone).
func pidCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(fields[11], 64)
	k, _ := strconv.ParseFloat(fields[12], 64)
	return (u + k) / 100 // clock ticks; USER_HZ is 100 on Linux
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return f[0]
}

func round2(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }

// wakeTable is a built-in adopt profile's table for the wake workload:
// its columns as the profile reads them, with an integer primary key.
type wakeTable struct {
	name   string
	ddl    func(store.Dialect) string
	insert func(store.Dialect) string
	args   func(seq int, payload string) []any
}

// wakeTypes are the id column and the timestamp type per dialect.
func wakeTypes(d store.Dialect) (id, ts, now string) {
	switch d {
	case store.MySQL:
		return "BIGINT AUTO_INCREMENT PRIMARY KEY", "DATETIME", "NOW()"
	case store.SQLite:
		return "INTEGER PRIMARY KEY AUTOINCREMENT", "DATETIME", "datetime('now')"
	}
	// LOCALTIMESTAMP(0) would round a due time up into the next second.
	return "BIGSERIAL PRIMARY KEY", "TIMESTAMP", "LOCALTIMESTAMP"
}

var wakeTables = map[string]*wakeTable{
	"laravel": {
		name: "local_messages",
		ddl: func(d store.Dialect) string {
			id, ts, _ := wakeTypes(d)
			return "CREATE TABLE local_messages (id " + id + ", topic VARCHAR(100) NOT NULL, payload TEXT NOT NULL, status VARCHAR(16) DEFAULT 'pending', " +
				"retry_times INT DEFAULT 0, max_retry_times INT DEFAULT 3, next_retry_at " + ts + ", created_at " + ts + ", updated_at " + ts + ");\n" +
				"CREATE INDEX status_next_retry_at ON local_messages (status, next_retry_at)"
		},
		insert: func(d store.Dialect) string {
			_, _, now := wakeTypes(d)
			return "INSERT INTO local_messages (topic, payload, max_retry_times, created_at, updated_at) VALUES ('bench.wake', ?, 3, " + now + ", " + now + ")"
		},
		args: func(_ int, payload string) []any { return []any{payload} },
	},
	"spring": {
		name: "t_local_message",
		ddl: func(d store.Dialect) string {
			id, ts, _ := wakeTypes(d)
			return "CREATE TABLE t_local_message (id " + id + ", message_id VARCHAR(64) NOT NULL UNIQUE, topic VARCHAR(100) NOT NULL, tag VARCHAR(100), " +
				"business_key VARCHAR(128) NOT NULL, payload TEXT NOT NULL, status VARCHAR(20) NOT NULL DEFAULT 'PENDING', retry_count INT NOT NULL DEFAULT 0, " +
				"max_retry INT NOT NULL DEFAULT 10, next_retry_time " + ts + ", error_msg TEXT, create_time " + ts + ", update_time " + ts + ");\n" +
				"CREATE INDEX idx_status_next_retry ON t_local_message (status, next_retry_time)"
		},
		insert: func(d store.Dialect) string {
			_, _, now := wakeTypes(d)
			return "INSERT INTO t_local_message (message_id, topic, tag, business_key, payload, status, retry_count, max_retry, next_retry_time, create_time, update_time) " +
				"VALUES (?, 'bench.wake', 'bench', 'k', ?, 'PENDING', 0, 10, " + now + ", " + now + ", " + now + ")"
		},
		args: func(_ int, payload string) []any { return []any{uuid.NewString(), payload} },
	},
	"codes": {
		name: "local_message",
		ddl: func(d store.Dialect) string {
			id, ts, _ := wakeTypes(d)
			return "CREATE TABLE local_message (id " + id + ", msg_id VARCHAR(64) NOT NULL UNIQUE, topic VARCHAR(64) NOT NULL, msg_content TEXT NOT NULL, " +
				"status SMALLINT NOT NULL, retry_count INT DEFAULT 0, next_retry_time " + ts + ", create_time " + ts + " NOT NULL, update_time " + ts + " NOT NULL)"
		},
		insert: func(d store.Dialect) string {
			_, _, now := wakeTypes(d)
			return "INSERT INTO local_message (msg_id, topic, msg_content, status, retry_count, create_time, update_time) VALUES (?, 'bench.wake', ?, 0, 0, " + now + ", " + now + ")"
		},
		args: func(_ int, payload string) []any { return []any{uuid.NewString(), payload} },
	},
}
