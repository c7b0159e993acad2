package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txoutbox/outbox/internal/adopt/adoptstore"
	"github.com/txoutbox/outbox/internal/relay"
	"github.com/txoutbox/outbox/internal/store"
)

// Relays runs a relay over each database a member serves: its Serve is
// the member's Config.Serve.
type Relays struct {
	// Relay configures every database's relay, checked and with its
	// defaults; Serve adds the database's name to its logs (a database
	// attribute), its metrics (a database label) and its alerts.
	Relay relay.Config
	// Share bounds the rounds running at once across all the member's
	// databases (its capacity), so that they share the workers fairly.
	Share chan struct{}
	// Open connects to the database named name when the member starts
	// serving it, and returns the function that closes it again (nil:
	// nothing to close). ok is false when the database has left the list
	// since: there is nothing to serve.
	Open func(ctx context.Context, name string) (b *store.Backend, closeFn func(), ok bool, err error)

	mu      sync.Mutex
	serving map[string]*relay.Relay // the relays running, by database
}

// Serve runs a relay over db until ctx ends.
func (r *Relays) Serve(ctx context.Context, db Database) error {
	b, closeFn, ok, err := r.Open(ctx, db.Name)
	if !ok {
		<-ctx.Done() // removed since: the supervisor stops it at once
		return nil
	}
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	if closeFn != nil {
		defer closeFn()
	}
	if b == nil {
		return errors.New("open returned no driver")
	}
	c := r.Relay
	c.Logger = c.Logger.With("database", db.Name)
	if c.Metrics != nil {
		reg := &unregisterer{reg: prometheus.WrapRegistererWith(prometheus.Labels{"database": db.Name}, c.Metrics)}
		defer reg.unregisterAll()
		c.Metrics = reg
	}
	c.Database, c.Share = db.Name, r.Share
	// A database whose driver reads an adopted table (store.TableSource):
	// the relay reads that table, leaving out payloads over its limit.
	rl, err := adoptstore.NewRelay(b, c)
	if err != nil {
		return err
	}
	r.mu.Lock()
	if r.serving == nil {
		r.serving = map[string]*relay.Relay{}
	}
	r.serving[db.Name] = rl
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.serving, db.Name)
		r.mu.Unlock()
	}()
	return rl.Run(ctx)
}

// Ready is nil while every database's relay is ready (relay.Relay.Ready),
// else the first one's error, naming the database, in name order.
func (r *Relays) Ready() error {
	r.mu.Lock()
	names := slices.Sorted(maps.Keys(r.serving))
	rels := make([]*relay.Relay, len(names))
	for i, n := range names {
		rels[i] = r.serving[n]
	}
	r.mu.Unlock()
	for i, rl := range rels {
		if err := rl.Ready(); err != nil {
			return fmt.Errorf("database %s: %w", names[i], err)
		}
	}
	return nil
}

// unregisterer remembers what it registers, so that a database's series
// leave the registry when the member stops serving it.
type unregisterer struct {
	reg prometheus.Registerer
	mu  sync.Mutex
	cs  []prometheus.Collector
}

func (u *unregisterer) Register(c prometheus.Collector) error {
	if err := u.reg.Register(c); err != nil {
		return err
	}
	u.mu.Lock()
	u.cs = append(u.cs, c)
	u.mu.Unlock()
	return nil
}

func (u *unregisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := u.Register(c); err != nil {
			panic(err)
		}
	}
}

func (u *unregisterer) Unregister(c prometheus.Collector) bool { return u.reg.Unregister(c) }

func (u *unregisterer) unregisterAll() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, c := range u.cs {
		u.reg.Unregister(c)
	}
	u.cs = nil
}
