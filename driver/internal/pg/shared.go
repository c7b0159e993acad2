package pg

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Shared listens over one connection per channel for many subscribers,
// each the outbox of one schema of the same database: NOTIFY channels are
// database-wide, so one LISTEN connection serves every schema, and a
// signal wakes only the subscriber whose schema it names (every one when
// it names none).
//
// The connection opens with the first subscriber of a channel and closes
// with the last. When it fails, every subscriber's Listen returns its
// error; the next Listen opens another.
type Shared struct {
	mu    sync.Mutex
	chans map[string]*sharedConn
}

// sharedConn is one LISTEN connection and its subscribers.
type sharedConn struct {
	database string
	subs     map[*subscriber]struct{}
	ready    bool // LISTEN has taken effect
	done     chan struct{}
	err      error // why the connection ended; set before done closes
	cancel   context.CancelFunc
}

type subscriber struct {
	schema string
	wake   func()
}

// Conn is what Shared needs from a subscriber's database: its outbox's
// schema and database name, a connection to take for the LISTEN, and a
// way to send the check signal from another connection.
type Conn struct {
	Schema, Database string
	Connect          func(ctx context.Context) (*pgx.Conn, error)
	Notify           func(ctx context.Context, channel, payload string) error
}

// SubscriberSQL reads what Conn's Schema and Database hold.
const SubscriberSQL = "SELECT " + tableSchema + ", current_database()"

// Listen subscribes wake to the signals on channel for c.Schema and
// blocks until ctx is done or the shared connection fails. wake is
// called once the connection listens (at once when it already does) and
// then for every signal naming c.Schema or no schema. A connection that
// does not receive its own check signal ends with driver.ErrNoSignals,
// like Listen's.
func (s *Shared) Listen(ctx context.Context, channel string, c Conn, wake func()) error {
	sub := &subscriber{schema: c.Schema, wake: wake}
	s.mu.Lock()
	if s.chans == nil {
		s.chans = make(map[string]*sharedConn)
	}
	sc := s.chans[channel]
	if sc != nil && sc.database != c.Database {
		s.mu.Unlock()
		return fmt.Errorf("outbox: a shared listener serves one database: %q listens for %q, not for %q", channel, sc.database, c.Database)
	}
	if sc == nil {
		cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		sc = &sharedConn{database: c.Database, subs: make(map[*subscriber]struct{}), done: make(chan struct{}), cancel: cancel}
		s.chans[channel] = sc
		go s.run(cctx, channel, sc, c)
	}
	sc.subs[sub] = struct{}{}
	ready := sc.ready
	s.mu.Unlock()
	defer s.leave(channel, sc, sub)
	if ready {
		wake()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-sc.done:
		return sc.err
	}
}

// leave removes sub; the last subscriber to leave closes the connection,
// and a Listen from then on opens another.
func (s *Shared) leave(channel string, sc *sharedConn, sub *subscriber) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(sc.subs, sub)
	if len(sc.subs) == 0 {
		if s.chans[channel] == sc {
			delete(s.chans, channel)
		}
		sc.cancel()
	}
}

// Listening is how many connections s holds.
func (s *Shared) Listening() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.chans)
}

func (s *Shared) run(ctx context.Context, channel string, sc *sharedConn, c Conn) {
	err := s.serve(ctx, channel, sc, c)
	s.mu.Lock()
	if s.chans[channel] == sc {
		delete(s.chans, channel)
	}
	sc.err = err
	close(sc.done)
	s.mu.Unlock()
	sc.cancel()
}

func (s *Shared) serve(ctx context.Context, channel string, sc *sharedConn, c Conn) error {
	conn, err := c.Connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	s.mu.Lock()
	sc.ready = true
	s.mu.Unlock()
	s.dispatch(sc, "")
	notify := func(ctx context.Context, payload string) error { return c.Notify(ctx, channel, payload) }
	if err := probe(ctx, conn, func(payload string) { s.dispatch(sc, payload) }, notify); err != nil {
		return err
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		s.dispatch(sc, n.Payload)
	}
}

// dispatch wakes the subscribers payload is for: those of the schema it
// names, or all when it names none.
func (s *Shared) dispatch(sc *sharedConn, payload string) {
	s.mu.Lock()
	var wakes []func()
	for sub := range sc.subs {
		if payload == "" || payload == sub.schema {
			wakes = append(wakes, sub.wake)
		}
	}
	s.mu.Unlock()
	for _, w := range wakes {
		w()
	}
}
