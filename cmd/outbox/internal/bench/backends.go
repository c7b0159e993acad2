package bench

import (
	"context"
	"net/url"
	"time"

	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/store"
)

// The relay's own database CPU.
//
// On PostgreSQL every connection is a server process of its own, so the
// database CPU a run's relays cost is the CPU time of the backends their
// connections hold, whatever else the server does meanwhile (producers,
// other clients of a shared server). A steady run on PostgreSQL gives its
// relays a pool of their own, named by application_name, and reads those
// backends' CPU from /proc at the start and the end; the producers' pool
// gets a name of its own too.

// withAppName sets application_name in a PostgreSQL URL unless it has one.
func withAppName(raw, name string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	if q.Get("application_name") != "" {
		return raw
	}
	q.Set("application_name", name)
	u.RawQuery = q.Encode()
	return u.String()
}

// relayAppName and producerAppName name a run's pools.
func (b *bench) relayAppName() string    { return "outbox-bench-relay-" + b.runID }
func (b *bench) producerAppName() string { return "outbox-bench-" + b.runID }

// openRelayPool gives the relays a pool of their own (PostgreSQL only;
// elsewhere they share the producers').
func (b *bench) openRelayPool(ctx context.Context) error {
	if b.d != store.Postgres || b.db.PGX == nil {
		return nil
	}
	raw := withAppName(withPoolSize(b.o.dbURL, b.o.maxConns()), b.relayAppName())
	db, err := dburl.Open(ctx, raw)
	if err != nil {
		return err
	}
	c, err := newPGConn(db.Pool, db.PGX)
	if err != nil {
		db.Close()
		return err
	}
	b.relayDB, b.relayConn = db, c
	return nil
}

// backendCPU is the CPU time of the server processes behind the
// connections named app, by pid; nil when it cannot say.
func (b *bench) backendCPU(ctx context.Context, app string) map[int]time.Duration {
	if b.d != store.Postgres {
		return nil
	}
	pids, err := queryInts(ctx, b, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", app)
	if err != nil {
		return nil
	}
	out := map[int]time.Duration{}
	for _, pid := range pids {
		if cpu, ok := processCPU(pid); ok {
			out[pid] = cpu
		}
	}
	return out
}

func queryInts(ctx context.Context, b *bench, q string, args ...any) ([]int, error) {
	rows, err := b.q.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// cpuBetween is the CPU the backends spent from a to z, in cores over
// seconds; backends that appeared meanwhile count from their start.
func cpuBetween(a, z map[int]time.Duration, seconds float64) *float64 {
	if z == nil || seconds <= 0 {
		return nil
	}
	var d time.Duration
	for pid, cpu := range z {
		d += cpu - a[pid]
	}
	v := d.Seconds() / seconds
	return &v
}
