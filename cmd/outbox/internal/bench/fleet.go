package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/driver/outboxpgx"
	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/fleet"
)

// wFleet is the fleet workload.
const wFleet = "fleet"

// fleetOptions are the fleet workload's flags.
type fleetOptions struct {
	pgURL    string
	pg       int
	sqlite   int
	relays   int
	rate     float64
	duration time.Duration
	idle     time.Duration
	bin      string
	json     bool
	extra    []string // more flags of the relays
}

// fleetResult is the fleet workload's report.
type fleetResult struct {
	Databases struct {
		PostgreSQL int `json:"postgresql"`
		SQLite     int `json:"sqlite"`
	} `json:"databases"`
	Relays int `json:"relays"`
	Idle   struct {
		Seconds float64 `json:"seconds"`
		// CPUPercent is each relay's CPU (user + system) over the idle
		// phase, in percent of one core.
		CPUPercent []float64 `json:"cpu_percent"`
		// ReadsPerSecond is each relay's read statements per second
		// (outbox_read_duration_seconds), every database together;
		// SQLiteReadsPerSecond counts the SQLite files' alone (the
		// PostgreSQL schemas of one database share one NOTIFY channel, so
		// other schemas' commits wake them).
		ReadsPerSecond       []float64 `json:"reads_per_second"`
		SQLiteReadsPerSecond []float64 `json:"sqlite_reads_per_second"`
	} `json:"idle"`
	Active struct {
		Seconds       float64   `json:"seconds"`
		RatePerDB     float64   `json:"rate_per_database"`
		Committed     int       `json:"committed"`
		Arrived       int       `json:"arrived"`
		Throughput    float64   `json:"messages_per_second"`
		P50Millis     float64   `json:"p50_ms"`
		P99Millis     float64   `json:"p99_ms"`
		MaxMillis     float64   `json:"max_ms"`
		CPUPercent    []float64 `json:"cpu_percent"`
		Connections   []int     `json:"connections"`
		DatabasesHeld []int     `json:"postgresql_databases_served"`
	} `json:"active"`
	// TakeoverSeconds is how long after a relay was SIGKILLed every one
	// of its PostgreSQL databases had a message committed after the kill
	// delivered; omitted with one relay, which no other can take over
	// from.
	TakeoverSeconds *float64 `json:"takeover_seconds,omitempty"`
}

func fleetFlags(o *fleetOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("outbox bench fleet", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.pgURL, "db", "", "PostgreSQL `URL` in which the run makes its databases (schemas) (default $OUTBOX_DATABASE_URL)")
	fs.IntVar(&o.pg, "pg", 20, "PostgreSQL databases (schemas of --db), active during the active phase")
	fs.IntVar(&o.sqlite, "sqlite", 200, "SQLite files, idle throughout")
	fs.IntVar(&o.relays, "relays", 2, "relay processes sharing the databases (with 1 there is no takeover to measure)")
	fs.Float64Var(&o.rate, "rate", 50, "messages per second committed to each PostgreSQL database in the active phase")
	fs.DurationVar(&o.duration, "duration", 20*time.Second, "length of the active phase")
	fs.DurationVar(&o.idle, "idle", 15*time.Second, "length of the idle phase")
	fs.StringVar(&o.bin, "outbox", "", "the outbox `PROGRAM` to run the relays with (default this one)")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.Func("relay-flag", "a further flag of the relays, e.g. --relay-flag=--max-poll=5s (repeatable)", func(v string) error {
		o.extra = append(o.extra, v)
		return nil
	})
	return fs
}

// runFleet runs the fleet workload: it makes the databases, starts the
// relay processes over a list of them, measures an idle phase, an active
// phase and the takeover of a killed relay's databases, and removes what
// it made.
func runFleet(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string, secrets *[]string) error {
	o := &fleetOptions{}
	if err := parseWorkload(wFleet, fleetFlags(o), args, stdout); err != nil {
		return err
	}
	o.pgURL = databaseURL(o.pgURL, getenv, secrets)
	switch {
	case o.pg < 1 || o.sqlite < 0 || o.relays < 1:
		return usagef("fleet: want --pg of at least 1, --sqlite of at least 0 and --relays of at least 1")
	case o.rate <= 0 || o.duration <= 0 || o.idle <= 0:
		return usagef("fleet: --rate, --duration and --idle must be above 0")
	}
	if d, _, err := dburl.Parse(o.pgURL); err != nil {
		return err
	} else if d != "postgres" {
		return usagef("fleet: --db must be a PostgreSQL URL")
	}
	if o.bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		o.bin = exe
	}
	f := &fleetRun{o: o, stderr: stderr, arrived: map[string]time.Time{}, committed: map[string]time.Time{}, dbOf: map[string]string{}}
	defer f.cleanup()
	res, err := f.run(ctx)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(stdout, res)
	}
	writeFleet(stdout, res)
	return nil
}

// fleetRun is one run of the fleet workload.
type fleetRun struct {
	o      *fleetOptions
	stderr io.Writer
	dir    string
	admin  *pgxpool.Pool
	pools  []*pgxpool.Pool
	schema []string
	list   []fleet.Database
	procs  []*exec.Cmd
	name   string

	mu        sync.Mutex
	arrived   map[string]time.Time // message id → first arrival
	committed map[string]time.Time // message id → commit
	dbOf      map[string]string    // message id → database name
}

func (f *fleetRun) logf(format string, args ...any) {
	fmt.Fprintf(f.stderr, "fleet: "+format+"\n", args...)
}

// run makes the databases, starts the relays and measures the three
// phases: idle, active under the producers, and the takeover of a killed
// relay's databases.
func (f *fleetRun) run(ctx context.Context) (*fleetResult, error) {
	o := f.o
	var err error
	f.name = fmt.Sprintf("bench_fleet_%d", time.Now().UnixNano()%1_000_000_000)
	if f.dir, err = os.MkdirTemp("", "outbox-bench-fleet-"); err != nil {
		return nil, err
	}
	if f.admin, err = pgxpool.New(ctx, o.pgURL); err != nil {
		return nil, err
	}
	if err := f.makeDatabases(ctx); err != nil {
		return nil, err
	}
	listFile, err := f.writeList()
	if err != nil {
		return nil, err
	}
	hook, stopHook, err := f.receiver()
	if err != nil {
		return nil, err
	}
	defer func() {
		// The relays go first: without the receiver they would take
		// its refused connections for an outage and say so.
		f.stopRelays()
		stopHook()
	}()

	res := &fleetResult{Relays: o.relays}
	res.Databases.PostgreSQL, res.Databases.SQLite = o.pg, o.sqlite
	members, metrics, err := f.startRelays(ctx, listFile, hook)
	if err != nil {
		return nil, err
	}
	f.logf("%d relays started; waiting until every database is served", o.relays)
	if err := f.waitServed(ctx, metrics, len(f.list)); err != nil {
		return nil, err
	}
	if err := f.idlePhase(ctx, res, metrics); err != nil {
		return nil, err
	}

	f.logf("active phase: %s at %g msg/s on each of %d PostgreSQL databases", o.duration, o.rate, o.pg)
	pctx, stopProducers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, pool := range f.pools {
		wg.Go(func() { f.produce(pctx, pool, f.list[i].Name) })
	}
	start, end, el := f.activePhase(ctx, res, members)
	if len(members) > 1 {
		f.killBusiest(ctx, res, members)
	}
	stopProducers()
	wg.Wait()

	lat, committed, arrived := f.latencies(start, end)
	res.Active.Seconds, res.Active.RatePerDB, res.Active.Committed, res.Active.Arrived = round1(el), o.rate, committed, arrived
	res.Active.Throughput = round1(float64(arrived) / el)
	if len(lat) > 0 {
		res.Active.P50Millis = ms(lat[len(lat)/2])
		res.Active.P99Millis = ms(lat[len(lat)*99/100])
		res.Active.MaxMillis = ms(lat[len(lat)-1])
	}
	return res, nil
}

// makeDatabases makes the PostgreSQL schemas (each with a small pool for
// its producer) and the SQLite files, migrated, and lists them.
func (f *fleetRun) makeDatabases(ctx context.Context) error {
	o := f.o
	f.logf("making %d PostgreSQL schemas and %d SQLite files", o.pg, o.sqlite)
	for i := range o.pg {
		s := fmt.Sprintf("%s_%d", f.name, i)
		if _, err := f.admin.Exec(ctx, "CREATE SCHEMA "+s); err != nil {
			return err
		}
		f.schema = append(f.schema, s)
		u := withSearchPath(o.pgURL, s)
		if err := migrateURL(ctx, u); err != nil {
			return err
		}
		f.list = append(f.list, fleet.Database{Name: fmt.Sprintf("pg%03d", i), URL: u})
		cfg, err := pgxpool.ParseConfig(u)
		if err != nil {
			return err
		}
		cfg.MaxConns = 2
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return err
		}
		f.pools = append(f.pools, pool)
	}
	for i := range o.sqlite {
		u := "sqlite://" + filepath.Join(f.dir, fmt.Sprintf("db%03d.db", i))
		if err := migrateURL(ctx, u); err != nil {
			return err
		}
		f.list = append(f.list, fleet.Database{Name: fmt.Sprintf("lite%03d", i), URL: u})
	}
	return nil
}

// writeList writes the database list for the relays' --db-file and
// returns its path.
func (f *fleetRun) writeList() (string, error) {
	listFile := filepath.Join(f.dir, "databases")
	var b strings.Builder
	for _, db := range f.list {
		fmt.Fprintf(&b, "%s %s\n", db.Name, db.URL)
	}
	return listFile, os.WriteFile(listFile, []byte(b.String()), 0o600)
}

// startRelays starts the fleet's relay processes, delivering to hook; it
// returns their member ids and metrics addresses.
func (f *fleetRun) startRelays(ctx context.Context, listFile, hook string) (members, metrics []string, err error) {
	o := f.o
	members = make([]string, o.relays)
	for i := range o.relays {
		members[i] = fmt.Sprintf("%s-r%d", f.name, i)
		addr, err := freeAddr()
		if err != nil {
			return nil, nil, err
		}
		metrics = append(metrics, addr)
		args := append([]string{"relay", "--db-file", listFile, "--fleet", f.name, "--fleet-db", f.list[0].URL,
			"--id", members[i], "--to", hook, "--metrics", addr, "--log-level", "warn"}, o.extra...)
		cmd := exec.CommandContext(ctx, o.bin, args...)
		cmd.Stderr = f.stderr
		if err := cmd.Start(); err != nil {
			return nil, nil, err
		}
		f.procs = append(f.procs, cmd)
	}
	return members, metrics, nil
}

// idlePhase measures each relay's CPU and reads while nothing is
// produced.
func (f *fleetRun) idlePhase(ctx context.Context, res *fleetResult, metrics []string) error {
	f.logf("idle phase: %s", f.o.idle)
	cpu0, reads0, lite0 := f.cpu(), f.reads(metrics, ""), f.reads(metrics, "lite")
	start := time.Now()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(f.o.idle):
	}
	el := time.Since(start).Seconds()
	cpu1, reads1, lite1 := f.cpu(), f.reads(metrics, ""), f.reads(metrics, "lite")
	res.Idle.Seconds = el
	for i := range f.procs {
		res.Idle.CPUPercent = append(res.Idle.CPUPercent, round1(100*(cpu1[i]-cpu0[i])/el))
		res.Idle.ReadsPerSecond = append(res.Idle.ReadsPerSecond, round1((reads1[i]-reads0[i])/el))
		res.Idle.SQLiteReadsPerSecond = append(res.Idle.SQLiteReadsPerSecond, round1((lite1[i]-lite0[i])/el))
	}
	return nil
}

// activePhase measures each relay's CPU over the active phase (the
// producers running), and half way through its connections and how many
// PostgreSQL databases each holds. It returns the phase's bounds and its
// length in seconds.
func (f *fleetRun) activePhase(ctx context.Context, res *fleetResult, members []string) (start, end time.Time, el float64) {
	o := f.o
	cpu0 := f.cpu()
	start = time.Now()
	half := o.duration / 2
	time.Sleep(half)
	res.Active.Connections = f.connections(ctx, members)
	for _, m := range members {
		res.Active.DatabasesHeld = append(res.Active.DatabasesHeld, len(fleet.Assigned(m, members, f.list[:o.pg])))
	}
	time.Sleep(o.duration - half)
	el = time.Since(start).Seconds()
	cpu1 := f.cpu()
	end = time.Now()
	for i := range f.procs {
		res.Active.CPUPercent = append(res.Active.CPUPercent, round1(100*(cpu1[i]-cpu0[i])/el))
	}
	return start, end, el
}

// killBusiest kills the relay serving the most PostgreSQL databases and
// measures how long the others take to serve them.
func (f *fleetRun) killBusiest(ctx context.Context, res *fleetResult, members []string) {
	victim := 0
	for i, n := range res.Active.DatabasesHeld {
		if n > res.Active.DatabasesHeld[victim] {
			victim = i
		}
	}
	f.logf("takeover: SIGKILL relay %s", members[victim])
	lost := fleet.Assigned(members[victim], members, f.list[:f.o.pg])
	killed := time.Now()
	_ = f.procs[victim].Process.Signal(syscall.SIGKILL)
	_ = f.procs[victim].Wait()
	f.procs = slices.Delete(f.procs, victim, victim+1)
	t := f.takeover(ctx, lost, killed)
	res.TakeoverSeconds = &t
}

// receiver serves the webhook the relays deliver to.
func (f *fleetRun) receiver() (string, func(), error) {
	return serveHooks(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("webhook-id")
		now := time.Now()
		f.mu.Lock()
		if _, ok := f.arrived[id]; !ok {
			f.arrived[id] = now
		}
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
}

// produce commits one message at a time at the rate until ctx ends.
func (f *fleetRun) produce(ctx context.Context, pool *pgxpool.Pool, name string) {
	d, err := outboxpgx.New(pool, nil)
	if err != nil {
		return
	}
	p, err := outbox.NewProducer(d, nil)
	if err != nil {
		return
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / f.o.rate))
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		tx, err := pool.Begin(ctx)
		if err != nil {
			continue
		}
		id, err := p.Enqueue(ctx, tx, outbox.Message{Topic: "bench.fleet", Key: strconv.Itoa(n % 16), Payload: []byte(`{}`)})
		if err == nil {
			err = tx.Commit(ctx)
		} else {
			_ = tx.Rollback(ctx)
		}
		if err != nil {
			continue
		}
		now := time.Now()
		f.mu.Lock()
		f.committed[id], f.dbOf[id] = now, name
		f.mu.Unlock()
	}
}

// waitServed waits until the relays' metrics show n databases.
func (f *fleetRun) waitServed(ctx context.Context, metrics []string, n int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		total := 0
		for _, addr := range metrics {
			total += len(seriesOf(scrape(addr), "outbox_owned_partitions{"))
		}
		if total >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return errors.New("the relays did not serve every database within 2 minutes")
}

// cpu is each running relay's CPU seconds (user + system).
func (f *fleetRun) cpu() []float64 {
	out := make([]float64, len(f.procs))
	for i, p := range f.procs {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Process.Pid))
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 12 {
			u, _ := strconv.ParseFloat(fields[11], 64)
			k, _ := strconv.ParseFloat(fields[12], 64)
			out[i] = (u + k) / 100 // clock ticks; USER_HZ is 100 on Linux
		}
	}
	return out
}

// reads is each relay's count of read statements of the databases whose
// name starts with prefix, from its metrics.
func (f *fleetRun) reads(metrics []string, prefix string) []float64 {
	out := make([]float64, len(metrics))
	for i, addr := range metrics {
		for _, v := range seriesOf(scrape(addr), `outbox_read_duration_seconds_count{database="`+prefix) {
			out[i] += v
		}
	}
	return out
}

// connections counts each member's connections in pg_stat_activity.
func (f *fleetRun) connections(ctx context.Context, members []string) []int {
	out := make([]int, len(members))
	for i, m := range members {
		_ = f.admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, "outbox relay "+m).Scan(&out[i])
	}
	return out
}

// takeover waits until each of dbs had a message committed after killed
// arrive, and returns how long after killed the last one did (-1: not
// within a minute).
func (f *fleetRun) takeover(ctx context.Context, dbs []fleet.Database, killed time.Time) float64 {
	deadline := killed.Add(time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		first := map[string]time.Time{}
		f.mu.Lock()
		for id, c := range f.committed {
			a, ok := f.arrived[id]
			if !ok || c.Before(killed) {
				continue
			}
			if t, seen := first[f.dbOf[id]]; !seen || a.Before(t) {
				first[f.dbOf[id]] = a
			}
		}
		f.mu.Unlock()
		var last time.Time
		all := true
		for _, db := range dbs {
			t, ok := first[db.Name]
			if !ok {
				all = false
				break
			}
			if t.After(last) {
				last = t
			}
		}
		if all {
			return round1(last.Sub(killed).Seconds())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return -1
}

// latencies are the sorted commit→arrival times of the messages committed
// between from and to, with how many were committed and arrived.
func (f *fleetRun) latencies(from, to time.Time) ([]time.Duration, int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var lat []time.Duration
	committed := 0
	for id, c := range f.committed {
		if c.Before(from) || !c.Before(to) {
			continue
		}
		committed++
		if a, ok := f.arrived[id]; ok {
			lat = append(lat, a.Sub(c))
		}
	}
	slices.Sort(lat)
	return lat, committed, len(lat)
}

// cleanup stops the relays and removes the schemas and files.
func (f *fleetRun) cleanup() {
	f.stopRelays()
	for _, p := range f.pools {
		p.Close()
	}
	if f.admin != nil {
		for _, s := range f.schema {
			_, _ = f.admin.Exec(context.Background(), "DROP SCHEMA "+s+" CASCADE")
		}
		f.admin.Close()
	}
	if f.dir != "" {
		_ = os.RemoveAll(f.dir)
	}
}

// stopRelays stops the relay processes still running.
func (f *fleetRun) stopRelays() {
	for _, p := range f.procs {
		if p.ProcessState != nil {
			continue
		}
		_ = p.Process.Signal(syscall.SIGTERM)
		_ = p.Wait()
	}
}

// migrateURL installs the outbox schema in the database at u.
func migrateURL(ctx context.Context, u string) error {
	db, err := dburl.Open(ctx, u)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Migrate(ctx, nil)
	return err
}

func withSearchPath(raw, schema string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// scrape fetches a relay's /metrics text ("" on error).
func scrape(addr string) string {
	c := http.Client{Timeout: 5 * time.Second}
	res, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// seriesOf is the values of the series in a /metrics text whose line
// starts with name (a metric name and, maybe, the start of its labels).
func seriesOf(text, name string) []float64 {
	var out []float64
	for line := range strings.Lines(text) {
		if !strings.HasPrefix(line, name) || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			out = append(out, v)
		}
	}
	return out
}

func ms(d time.Duration) float64 { return round1(float64(d) / float64(time.Millisecond)) }

func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

func writeFleet(w io.Writer, r *fleetResult) {
	fmt.Fprintf(w, "fleet: %d PostgreSQL + %d SQLite databases, %d relay processes\n\n", r.Databases.PostgreSQL, r.Databases.SQLite, r.Relays)
	fmt.Fprintf(w, "idle (%.0f s): CPU per relay %v %% of a core; reads/s per relay %v, of which the SQLite files' %v\n", r.Idle.Seconds, r.Idle.CPUPercent, r.Idle.ReadsPerSecond, r.Idle.SQLiteReadsPerSecond)
	a := r.Active
	fmt.Fprintf(w, "active (%.0f s, %g msg/s per PostgreSQL database): %d committed, %d arrived, %.1f msg/s\n", a.Seconds, a.RatePerDB, a.Committed, a.Arrived, a.Throughput)
	fmt.Fprintf(w, "  commit→arrival p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", a.P50Millis, a.P99Millis, a.MaxMillis)
	fmt.Fprintf(w, "  CPU per relay %v %%; connections per relay %v for %v PostgreSQL databases each\n", a.CPUPercent, a.Connections, a.DatabasesHeld)
	switch {
	case r.TakeoverSeconds == nil:
		fmt.Fprintln(w, "takeover: not measured with one relay")
	case *r.TakeoverSeconds < 0:
		fmt.Fprintln(w, "takeover: a killed relay's databases were not served again within a minute")
	default:
		fmt.Fprintf(w, "takeover: a killed relay's databases served again after %.1f s\n", *r.TakeoverSeconds)
	}
}
