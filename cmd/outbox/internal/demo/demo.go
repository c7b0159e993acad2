// Package demo is `outbox demo`: the whole outbox loop on embedded defaults.
//
// An order service writes orders and their order.created messages in one
// transaction at a steady rate; a relay process delivers them as signed
// webhooks to an in-process inventory service that is down for the first
// seconds and then answers 503 at random; midway the relay is killed with
// SIGKILL and started again; the inventory service dedupes by message id.
// At the end the demo checks that every committed order's message arrived,
// reporting those that did not as lost or, when they went dead, as dead.
package demo

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	mrand "math/rand/v2"

	"github.com/jackc/pgx/v5"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/webhooksig"
)

// Main runs the demo; see the package comment. It returns the exit status.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dbURL := fs.String("db", "", "database URL (default: a SQLite file in a temp dir)")
	to := fs.String("to", "", "deliver to this destination URL instead of the in-process inventory service")
	orders := fs.Int("orders", 1500, "orders to write")
	rate := fs.Int("rate", 250, "orders per second")
	outage := fs.Duration("outage", 2*time.Second, "how long the inventory service is down at the start")
	failRate := fs.Float64("fail-rate", 0.2, "share of deliveries the inventory service answers with 503")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprintf(stderr, "outbox: demo: %v; run 'outbox demo --help'\n", err)
		return 2
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "outbox: demo: unexpected argument %q\n", fs.Arg(0))
		return 2
	case *orders < 1:
		fmt.Fprintln(stderr, "outbox: demo: --orders must be at least 1")
		return 2
	case *rate < 1:
		fmt.Fprintln(stderr, "outbox: demo: --rate must be at least 1")
		return 2
	case *failRate < 0 || *failRate >= 1:
		fmt.Fprintln(stderr, "outbox: demo: --fail-rate must be in [0, 1)")
		return 2
	}
	if *dbURL == "" {
		*dbURL = os.Getenv("OUTBOX_DATABASE_URL")
	}
	d := &demo{out: stdout, orders: *orders, rate: *rate, outage: *outage, failRate: *failRate, to: *to}
	if *dbURL == "" {
		dir, err := os.MkdirTemp("", "outbox-demo-")
		if err != nil {
			fmt.Fprintf(stderr, "outbox: demo: %v\n", err)
			return 1
		}
		defer os.RemoveAll(dir)
		*dbURL = "sqlite://" + filepath.Join(dir, "demo.db")
	} else if _, _, err := dburl.Parse(*dbURL); err != nil {
		fmt.Fprintf(stderr, "outbox: demo: %v\n", err)
		return 2
	}
	d.dbURL = *dbURL
	ok, err := d.run(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "outbox: demo: %s\n", oneLine(err.Error()))
		return 1
	}
	if !ok {
		return 1
	}
	return 0
}

const usage = `usage: outbox demo [--db URL] [--to URL] [--orders N] [--rate R] [--outage D] [--fail-rate F]

Runs the whole outbox loop: an order service writes orders and their
order.created messages in one transaction; a relay process delivers them to
an inventory service that is down at first and then fails at random; the
relay is killed with SIGKILL midway and restarted; the inventory service
dedupes by message id. Ends with a verification line; exits 0 only if
every message was delivered (a lost or a dead one fails the run).

  --db URL        database (default: a SQLite file in a temp dir)
  --to URL        deliver to this destination instead of the in-process
                  inventory service (the check then reads the outbox table)
  --orders N      orders to write (default 1500)
  --rate R        orders per second (default 250)
  --outage D      how long the inventory service is down first (default 2s)
  --fail-rate F   share of deliveries answered with 503 (default 0.2)
`

type demo struct {
	out      io.Writer
	dbURL    string
	to       string
	orders   int
	rate     int
	outage   time.Duration
	failRate float64

	db          *dburl.DB
	pgxProducer *outbox.Producer[pgx.Tx]
	sqlProducer *outbox.Producer[*sql.Tx]
	inv         *inventory
	relayCmd    *exec.Cmd
	relayErr    chan error
	written     int
	msgIDs      map[string]bool
	mu          sync.Mutex
}

func (d *demo) run(ctx context.Context) (bool, error) {
	db, err := dburl.Open(ctx, d.dbURL)
	if err != nil {
		return false, err
	}
	d.db = db
	defer db.Close()
	if err := d.migrate(ctx); err != nil {
		return false, err
	}
	d.msgIDs = map[string]bool{}
	fmt.Fprintf(d.out, "outbox demo: database %s\n", dburl.Redact(d.dbURL))

	target := d.to
	secret := ""
	if target == "" {
		key := make([]byte, 24)
		_, _ = rand.Read(key)
		secret = "whsec_" + base64.StdEncoding.EncodeToString(key)
		d.inv = newInventory(secret, d.outage, d.failRate)
		addr, stop, err := d.inv.serve()
		if err != nil {
			return false, err
		}
		defer stop()
		target = "http://" + addr + "/inventory/orders"
		fmt.Fprintf(d.out, "outbox demo: inventory service on %s: down for %v, then %.0f%% random 503s; dedupes by webhook-id\n", addr, d.outage, d.failRate*100)
	} else {
		fmt.Fprintf(d.out, "outbox demo: delivering to %s\n", dburl.Redact(target))
	}
	if err := d.startRelay(target, secret); err != nil {
		return false, err
	}
	defer d.stopRelay()

	produced := make(chan error, 1)
	go func() { produced <- d.produce(ctx) }()
	killAt := time.Now().Add(time.Duration(float64(d.orders)/float64(d.rate)/2*float64(time.Second)) + time.Second)
	killed := false
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	start := time.Now()
	producing := true
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case err := <-produced:
			if err != nil {
				return false, err
			}
			producing = false
		case err := <-d.relayErr:
			return false, fmt.Errorf("relay exited: %v", err)
		case <-tick.C:
		}
		if !killed && time.Now().After(killAt) {
			if err := d.killAndRestart(target, secret); err != nil {
				return false, err
			}
			killed = true
		}
		pending, err := d.pending(ctx)
		if err != nil {
			return false, err
		}
		d.progress(time.Since(start), pending)
		if !producing && pending == 0 && killed {
			break
		}
		if time.Since(start) > 5*time.Minute {
			return false, errors.New("not everything was delivered within 5 minutes")
		}
	}
	d.stopRelay()
	return d.verify(ctx)
}

// migrate creates the outbox tables and the demo's orders table, and the
// order service's producer.
func (d *demo) migrate(ctx context.Context) error {
	if _, err := d.db.Migrate(ctx, nil); err != nil {
		return err
	}
	var err error
	if d.db.PGX != nil {
		d.pgxProducer, err = outbox.NewProducer(d.db.PGX, nil)
	} else {
		d.sqlProducer, err = outbox.NewProducer(d.db.Std, nil)
	}
	if err != nil {
		return err
	}
	ddl := map[store.Dialect]string{
		store.Postgres: "CREATE TABLE IF NOT EXISTS outbox_demo_orders (id BIGSERIAL PRIMARY KEY, sku TEXT NOT NULL, quantity INT NOT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT now())",
		store.MySQL:    "CREATE TABLE IF NOT EXISTS outbox_demo_orders (id BIGINT AUTO_INCREMENT PRIMARY KEY, sku VARCHAR(64) NOT NULL, quantity INT NOT NULL, created_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))",
		store.SQLite:   "CREATE TABLE IF NOT EXISTS outbox_demo_orders (id INTEGER PRIMARY KEY AUTOINCREMENT, sku TEXT NOT NULL, quantity INTEGER NOT NULL, created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')))",
	}[d.db.Dialect]
	if d.db.Pool != nil {
		_, err = d.db.Pool.Exec(ctx, ddl)
		return err
	}
	_, err = d.db.SQL.ExecContext(ctx, ddl)
	return err
}

// produce is the order service: one transaction per order, holding the
// order row and its message; one in ten transactions is rolled back after
// the enqueue, and its message must never be delivered.
func (d *demo) produce(ctx context.Context) error {
	interval := time.Second / time.Duration(d.rate)
	next := time.Now()
	for i := 0; i < d.orders; {
		if wait := time.Until(next); wait > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
		}
		next = next.Add(interval)
		rollback := mrand.IntN(10) == 0
		id, err := d.order(ctx, i, rollback)
		if err != nil {
			return fmt.Errorf("order service: %w", err)
		}
		if !rollback {
			d.mu.Lock()
			d.msgIDs[id] = true
			d.written++
			d.mu.Unlock()
			i++
		}
	}
	return nil
}

func (d *demo) order(ctx context.Context, i int, rollback bool) (string, error) {
	sku := fmt.Sprintf("sku-%d", i%37)
	msg := outbox.Message{
		Topic:   "order.created",
		Key:     sku,
		Payload: fmt.Appendf(nil, `{"order":%d,"sku":%q,"quantity":%d}`, i, sku, 1+i%3),
	}
	if d.db.Pool != nil {
		tx, err := d.db.Pool.Begin(ctx)
		if err != nil {
			return "", err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, "INSERT INTO outbox_demo_orders (sku, quantity) VALUES ($1, $2)", sku, 1+i%3); err != nil {
			return "", err
		}
		id, err := d.pgxProducer.Enqueue(ctx, tx, msg)
		if err != nil || rollback {
			return id, err
		}
		return id, tx.Commit(ctx)
	}
	tx, err := d.db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return "", err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "INSERT INTO outbox_demo_orders (sku, quantity) VALUES (?, ?)", sku, 1+i%3); err != nil {
		return "", err
	}
	id, err := d.sqlProducer.Enqueue(ctx, tx, msg)
	if err != nil || rollback {
		return id, err
	}
	return id, tx.Commit()
}

func (d *demo) pending(ctx context.Context) (int64, error) {
	s, err := d.db.Backend().Store.Stats(ctx)
	if err != nil {
		return 0, err
	}
	return s.Pending, nil
}

func (d *demo) progress(elapsed time.Duration, pending int64) {
	d.mu.Lock()
	written := d.written
	d.mu.Unlock()
	line := fmt.Sprintf("  %4.0fs  orders %5d  pending %5d", elapsed.Seconds(), written, pending)
	if d.inv != nil {
		s := d.inv.snapshot()
		line += fmt.Sprintf("  delivered %5d  duplicates suppressed %4d  refused %4d", s.distinct, s.duplicates, s.refused)
	}
	fmt.Fprintln(d.out, line)
}

// startRelay runs `outbox relay` in its own process, as an operator would.
func (d *demo) startRelay(target, secret string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "relay", "--db", d.dbURL, "--to", target,
		"--lease-ttl", "1s", "--retry-base", "200ms", "--retry-cap", "2s", "--log-level", "error")
	cmd.Env = append(os.Environ(), "OUTBOX_WEBHOOK_SECRET="+secret)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start relay: %w", err)
	}
	d.relayCmd = cmd
	errc := make(chan error, 1)
	d.relayErr = errc
	go func() { errc <- cmd.Wait() }()
	return nil
}

func (d *demo) killAndRestart(target, secret string) error {
	fmt.Fprintln(d.out, "  ---- relay killed with SIGKILL mid-batch; starting a new one ----")
	_ = d.relayCmd.Process.Signal(syscall.SIGKILL)
	<-d.relayErr
	d.relayCmd = nil
	return d.startRelay(target, secret)
}

func (d *demo) stopRelay() {
	if d.relayCmd == nil {
		return
	}
	_ = d.relayCmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.relayErr:
	case <-time.After(15 * time.Second):
		_ = d.relayCmd.Process.Kill()
		<-d.relayErr
	}
	d.relayCmd = nil
}

func (d *demo) verify(ctx context.Context) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var orders int
	q := "SELECT count(*) FROM outbox_demo_orders"
	var err error
	if d.db.Pool != nil {
		err = d.db.Pool.QueryRow(ctx, q).Scan(&orders)
	} else {
		err = d.db.SQL.QueryRowContext(ctx, q).Scan(&orders)
	}
	if err != nil {
		return false, err
	}
	st := d.db.Backend().Store
	ids := make([]string, 0, len(d.msgIDs))
	for id := range d.msgIDs {
		ids = append(ids, id)
	}
	var sent, dead int
	deadIDs := map[string]bool{}
	for start := 0; start < len(ids); start += 500 {
		rows, err := st.List(ctx, store.Filter{MessageIDs: ids[start:min(len(ids), start+500)], Limit: 500})
		if err != nil {
			return false, err
		}
		for _, r := range rows {
			switch r.Status {
			case store.StatusSent, store.StatusConsumed:
				sent++
			case store.StatusDead:
				dead++
				deadIDs[r.MessageID] = true
			}
		}
	}
	// A dead message is reported as dead, not lost: it is in the outbox
	// with its reason, for an operator to requeue. Either fails the run.
	lost := len(ids) - sent - dead
	delivered, dups, unexpected := sent, 0, 0
	if d.inv != nil {
		s := d.inv.snapshot()
		delivered, dups, lost = 0, s.duplicates, 0
		for id := range d.msgIDs {
			switch {
			case s.seen[id]:
				delivered++
			case !deadIDs[id]:
				lost++
			}
		}
		unexpected = s.distinct - delivered
	}
	ok := lost == 0 && dead == 0 && unexpected == 0 && orders == d.written
	verdict := "OK"
	if !ok {
		verdict = "FAILED"
	}
	fmt.Fprintf(d.out, "verified %s: %d orders written, %d messages delivered, lost %d, unexpected %d, duplicates suppressed %d, dead %d\n",
		verdict, orders, delivered, lost, unexpected, dups, dead)
	return ok, nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// inventory is the downstream service: it verifies signatures, refuses
// deliveries while "down" and at random afterwards, and dedupes by id.
type inventory struct {
	secret   string
	upAt     time.Time
	failRate float64

	mu       sync.Mutex
	seen     map[string]bool
	dups     int
	refused  int
	badSigns int
}

type invStats struct {
	seen                          map[string]bool
	distinct, duplicates, refused int
}

func newInventory(secret string, outage time.Duration, failRate float64) *inventory {
	return &inventory{secret: secret, upAt: time.Now().Add(outage), failRate: failRate, seen: map[string]bool{}}
}

func (v *inventory) serve() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: v, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), func() { _ = srv.Close() }, nil
}

func (v *inventory) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	if err := webhooksig.Verify(v.secret, r.Header, body, 5*time.Minute, time.Now()); err != nil {
		v.mu.Lock()
		v.badSigns++
		v.mu.Unlock()
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if time.Now().Before(v.upAt) || mrand.Float64() < v.failRate {
		v.refused++
		http.Error(w, "inventory busy", http.StatusServiceUnavailable)
		return
	}
	id := r.Header.Get("webhook-id")
	if v.seen[id] {
		v.dups++ // already applied: acknowledge without applying again
	} else {
		v.seen[id] = true // apply: reserve stock (once)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (v *inventory) snapshot() invStats {
	v.mu.Lock()
	defer v.mu.Unlock()
	seen := make(map[string]bool, len(v.seen))
	for k := range v.seen {
		seen[k] = true
	}
	return invStats{seen: seen, distinct: len(v.seen), duplicates: v.dups, refused: v.refused}
}
