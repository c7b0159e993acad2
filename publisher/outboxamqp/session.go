package outboxamqp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/txoutbox/outbox/publisher"
)

// session is one connection with one confirm-mode channel, and the
// dispatcher goroutine that matches the broker's returns and confirms to
// the messages in flight.
//
// Returns are read from an unbuffered channel by the same goroutine that
// reads the confirms: amqp091-go hands a message's basic.return to it
// before it even decodes the ack that follows, so by the time the
// dispatcher sees an ack, the return of that message has been recorded.
type session struct {
	conn     *amqp.Connection
	ch       *amqp.Channel
	confirms chan amqp.Confirmation
	returns  chan amqp.Return
	closes   chan *amqp.Error
	blocks   chan amqp.Blocking
	slots    chan struct{} // in-flight window
	dead     chan struct{} // closed once the channel is gone
	blocked  atomic.Pointer[string]

	exchange string
	vhost    string

	mu       sync.Mutex
	flights  map[uint64]*flight   // by delivery tag
	byID     map[string][]*flight // by message id, for returns
	closeErr *amqp.Error          // why the channel closed; nil for a clean close
	oversize int64                // the broker's max message size, from a 406
}

// flight is one message sent and not yet confirmed.
type flight struct {
	b        *batchState
	i        int
	id       string
	size     int
	returned *amqp.Return
}

// batchState is one Publish call's results, shared with the writer and the
// dispatcher under session.mu.
type batchState struct {
	errs     []error
	state    []uint8 // per index: stateUnsent, stateSent, stateDone
	left     int
	done     chan struct{}
	finished bool // Publish returned: results are final
	abort    chan struct{}
}

const (
	stateUnsent uint8 = iota
	stateSent
	stateDone
)

// session returns the live session. After the channel closed on a live
// connection (a missing exchange, say) it opens a new channel on it; with
// no connection it connects.
func (p *Publisher) session(ctx context.Context) (*session, error) {
	p.mu.Lock()
	s := p.sess
	p.mu.Unlock()
	var prev *session
	if s != nil {
		select {
		case <-s.dead:
			if max := s.oversize; max > 0 {
				if cur := p.maxBytes.Load(); cur == 0 || max < cur {
					p.maxBytes.Store(max)
				}
			}
			if s.conn.IsClosed() {
				p.discard(s)
			} else {
				prev = s
			}
		default:
			return s, nil
		}
	}
	s, err := p.open(ctx, prev)
	if err != nil {
		if prev != nil {
			p.discard(prev)
		}
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = s.conn.CloseDeadline(time.Now().Add(closeGrace))
		return nil, ErrClosed
	}
	p.sess = s
	return s, nil
}

// discard drops s and closes its connection in the background.
func (p *Publisher) discard(s *session) {
	p.mu.Lock()
	if p.sess == s {
		p.sess = nil
	}
	p.mu.Unlock()
	p.wg.Go(func() { _ = s.conn.CloseDeadline(time.Now().Add(closeGrace)) })
}

// open opens a confirm-mode channel on prev's connection, or on a new one
// when prev is nil, within DialTimeout and ctx. Failures are Unavailable:
// nothing was sent.
func (p *Publisher) open(ctx context.Context, prev *session) (*session, error) {
	start := time.Now()
	octx, cancel := context.WithTimeout(ctx, p.dialTimeout)
	defer cancel()
	fail := func(err error) (*session, error) {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, p.notSent(ctx) // shutting down; not the broker's fault
		}
		if octx.Err() != nil {
			err = fmt.Errorf("no answer within %v", time.Since(start).Round(100*time.Millisecond))
		}
		return nil, publisher.Unavailable(fmt.Errorf("connect %s: %v", p.redacted, err))
	}
	var conn *amqp.Connection
	var err error
	switch {
	case prev != nil:
		conn = prev.conn
	case p.connect != nil:
		conn, err = p.connect(octx)
	default:
		conn, err = p.dial(octx)
	}
	if err != nil {
		return fail(err)
	}
	// Channel and Confirm are RPCs without a context: a broker that stops
	// answering is cut off by closing the connection under them.
	killed := make(chan struct{})
	stop := context.AfterFunc(octx, func() {
		defer close(killed)
		_ = conn.CloseDeadline(time.Now())
	})
	s, err := p.newSession(conn, prev)
	if !stop() {
		<-killed
		if err == nil {
			err = octx.Err()
		}
		return fail(err)
	}
	if err != nil {
		if prev == nil {
			_ = conn.CloseDeadline(time.Now().Add(closeGrace))
		}
		return fail(err)
	}
	p.wg.Go(s.dispatch)
	return s, nil
}

// dial opens a connection to the URL's broker. The TCP connection is closed
// under the handshake if octx ends first.
func (p *Publisher) dial(octx context.Context) (*amqp.Connection, error) {
	var mu sync.Mutex
	var raw net.Conn
	stop := context.AfterFunc(octx, func() {
		mu.Lock()
		defer mu.Unlock()
		if raw != nil {
			_ = raw.Close()
		}
	})
	defer stop()
	cfg := amqp.Config{
		SASL:      []amqp.Authentication{&amqp.PlainAuth{Username: p.user, Password: p.pass}},
		Vhost:     p.vhost,
		Heartbeat: p.heartbeat,
		Properties: amqp.Table{
			"connection_name": p.connName,
		},
		Dial: func(network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(octx, network, addr)
			if err != nil {
				return nil, err
			}
			if dl, ok := octx.Deadline(); ok {
				_ = c.SetDeadline(dl) // amqp091-go clears it once open
			}
			if p.tls != nil {
				tc := tls.Client(c, p.tls)
				if err := tc.HandshakeContext(octx); err != nil {
					_ = c.Close()
					return nil, fmt.Errorf("TLS handshake: %w", err)
				}
				c = tc
			}
			mu.Lock()
			raw = c
			mu.Unlock()
			if octx.Err() != nil {
				_ = c.Close()
				return nil, octx.Err()
			}
			return c, nil
		},
	}
	// TLS is done by Dial above, so amqp091-go is always given amqp://.
	conn, err := amqp.DialConfig("amqp://"+p.addr+"/", cfg)
	if err != nil {
		return nil, dialError(err)
	}
	return conn, nil
}

// dialError rewrites amqp091-go's handshake errors into one clear line.
func dialError(err error) error {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return fmt.Errorf("%d %s", ae.Code, ae.Reason)
	}
	return err
}

// newSession opens the channel. A session replacing prev on the same
// connection takes over its connection.blocked listener.
func (p *Publisher) newSession(conn *amqp.Connection, prev *session) (*session, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open channel: %w", dialError(err))
	}
	if err := ch.Confirm(false); err != nil {
		return nil, fmt.Errorf("enable publisher confirms: %w", dialError(err))
	}
	s := &session{
		conn:     conn,
		ch:       ch,
		exchange: p.exchange,
		vhost:    p.vhost,
		confirms: ch.NotifyPublish(make(chan amqp.Confirmation, p.maxInFlight+1)),
		returns:  ch.NotifyReturn(make(chan amqp.Return)),
		closes:   ch.NotifyClose(make(chan *amqp.Error, 1)),
		slots:    make(chan struct{}, p.maxInFlight),
		dead:     make(chan struct{}),
		flights:  map[uint64]*flight{},
		byID:     map[string][]*flight{},
	}
	if prev != nil {
		s.blocks = prev.blocks
		s.blocked.Store(prev.blocked.Load())
	} else {
		s.blocks = conn.NotifyBlocked(make(chan amqp.Blocking, 1))
	}
	return s, nil
}

// blockedReason is why the broker blocked publishing, "" when it has not.
func (s *session) blockedReason() string {
	if r := s.blocked.Load(); r != nil {
		return *r
	}
	return ""
}

// dispatch matches returns and confirms to flights until the channel
// closes, then fails what is still in flight.
func (s *session) dispatch() {
	returns, blocks := s.returns, s.blocks
	for {
		select {
		case c, ok := <-s.confirms:
			if !ok {
				s.die()
				return
			}
			s.confirm(c)
		case r, ok := <-returns:
			if !ok {
				returns = nil
				continue
			}
			s.returned(r)
		case b, ok := <-blocks:
			if !ok {
				blocks = nil
				continue
			}
			if b.Active {
				reason := b.Reason
				if reason == "" {
					reason = "resource alarm"
				}
				s.blocked.Store(&reason)
			} else {
				s.blocked.Store(nil)
			}
		}
	}
}

func (s *session) returned(r amqp.Return) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.byID[r.MessageId] {
		if f.returned == nil {
			f.returned = &r
			return
		}
	}
}

func (s *session) confirm(c amqp.Confirmation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.flights[c.DeliveryTag]
	if f == nil {
		return
	}
	var err error
	switch {
	case !c.Ack:
		err = fmt.Errorf("%w (negative publisher confirm)", ErrNacked)
	case f.returned != nil:
		err = publisher.Permanent(fmt.Errorf("%w: no queue bound to exchange %q with routing key %q (%d %s)",
			ErrUnroutable, f.returned.Exchange, f.returned.RoutingKey, f.returned.ReplyCode, f.returned.ReplyText))
	}
	s.resolveLocked(c.DeliveryTag, f, err)
}

// resolveLocked settles one flight. s.mu is held.
func (s *session) resolveLocked(tag uint64, f *flight, err error) {
	s.unregisterLocked(tag, f)
	f.b.settleLocked(f.i, err)
}

// unregisterLocked forgets a flight and frees its slot. s.mu is held.
func (s *session) unregisterLocked(tag uint64, f *flight) {
	delete(s.flights, tag)
	list := s.byID[f.id]
	for i, g := range list {
		if g == f {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(s.byID, f.id)
	} else {
		s.byID[f.id] = list
	}
	select {
	case <-s.slots:
	default:
	}
}

// settleLocked records index i's result unless Publish has returned.
func (b *batchState) settleLocked(i int, err error) {
	if b.finished || b.state[i] == stateDone {
		return
	}
	b.errs[i] = err
	b.state[i] = stateDone
	b.left--
	if b.left == 0 {
		close(b.done)
	}
}

// die records why the channel closed and fails every flight with it.
func (s *session) die() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case e := <-s.closes:
		s.closeErr = e
	default:
	}
	if s.closeErr != nil && s.closeErr.Code == amqp.PreconditionFailed {
		s.oversize = parseMaxSize(s.closeErr.Reason)
	}
	for tag, f := range s.flights {
		s.resolveLocked(tag, f, s.lost(f, true))
	}
	close(s.dead)
}

// lost is the error of a message on a channel that closed: sent says
// whether it went out. s.mu is held.
func (s *session) lost(f *flight, sent bool) error {
	e := s.closeErr
	switch {
	case e == nil:
		if sent {
			return publisher.Unknown(errors.New("connection closed before the broker confirmed the message"))
		}
		return errors.New("not sent: connection closed")
	case e.Server && e.Code == amqp.NotFound && strings.Contains(e.Reason, "exchange"):
		return publisher.Permanent(&exchangeError{exchange: s.exchange, vhost: s.vhost})
	case e.Code == amqp.PreconditionFailed && s.oversize > 0 && f != nil && int64(f.size) > s.oversize:
		return publisher.Permanent(fmt.Errorf("%w: %d bytes, the broker's max_message_size is %d", ErrTooLarge, f.size, s.oversize))
	}
	what, why := "channel closed", fmt.Sprintf("%d %s", e.Code, e.Reason)
	switch {
	case !e.Server: // the network, not the broker
		what, why = "connection lost", e.Reason
	case !e.Recover: // a connection error, not a channel one
		what = "connection closed by the broker"
	}
	if sent {
		return publisher.Unknown(fmt.Errorf("%s before the broker confirmed the message: %s", what, why))
	}
	if what != "channel closed" {
		return publisher.Unavailable(fmt.Errorf("not sent: %s: %s", what, why))
	}
	return fmt.Errorf("not sent: %s: %s", what, why)
}

// publish pipelines the batch's todo indexes on s and fills errs.
func (p *Publisher) publish(ctx context.Context, s *session, batch []*publisher.Envelope, todo []int, errs []error) {
	b := &batchState{
		errs:  errs,
		state: make([]uint8, len(batch)),
		left:  len(todo),
		done:  make(chan struct{}),
		abort: make(chan struct{}),
	}
	for i := range b.state {
		b.state[i] = stateDone
	}
	for _, i := range todo {
		b.state[i] = stateUnsent
	}
	p.wg.Go(func() { p.write(s, b, batch, todo) })
	select {
	case <-b.done:
		return
	case <-ctx.Done():
	}
	// Out of time: what went out is an unknown outcome, the rest was not
	// sent. The session is dropped so that late confirms and returns of
	// this batch can never be taken for a later one's.
	s.mu.Lock()
	if !b.finished {
		b.finished = true
		for i, st := range b.state {
			switch st {
			case stateSent:
				errs[i] = publisher.Unknown(fmt.Errorf("no confirm from the broker: %w", ctx.Err()))
			case stateUnsent:
				errs[i] = p.notSent(ctx)
			}
		}
	}
	s.mu.Unlock()
	close(b.abort)
	p.discard(s)
}

// write sends the batch in order, each message once a slot of the
// in-flight window is free.
func (p *Publisher) write(s *session, b *batchState, batch []*publisher.Envelope, todo []int) {
	for n, i := range todo {
		env := batch[i]
		select {
		case s.slots <- struct{}{}:
		case <-b.abort:
			return
		case <-s.dead:
			s.failUnsent(b, todo[n:])
			return
		}
		msg := p.message(env)
		f := &flight{b: b, i: i, id: env.ID, size: len(env.Payload)}
		s.mu.Lock()
		if b.finished {
			s.mu.Unlock()
			return
		}
		tag := s.ch.GetNextPublishSeqNo()
		s.flights[tag] = f
		s.byID[f.id] = append(s.byID[f.id], f)
		b.state[i] = stateSent // from here on it may reach the broker
		s.mu.Unlock()
		_, err := s.ch.PublishWithDeferredConfirm(p.exchange, env.Destination, true, false, msg)
		if err == nil {
			continue
		}
		s.mu.Lock()
		if s.flights[tag] == f { // not settled: it never went out
			s.unregisterLocked(tag, f)
			b.state[i] = stateUnsent
		}
		s.mu.Unlock()
		select {
		case <-s.dead:
		case <-b.abort:
			return
		}
		s.failUnsent(b, todo[n:])
		return
	}
}

// failUnsent settles indexes that were never sent, once s is dead.
func (s *session) failUnsent(b *batchState, idx []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, i := range idx {
		if b.state[i] == stateUnsent {
			b.settleLocked(i, s.lost(nil, false))
		}
	}
}

// parseMaxSize reads the limit out of RabbitMQ's "message size N is larger
// than configured max size M"; 0 when the reason is another.
func parseMaxSize(reason string) int64 {
	const marker = "larger than configured max size "
	i := strings.Index(reason, marker)
	if i < 0 {
		return 0
	}
	var n int64
	for _, c := range reason[i+len(marker):] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// exchangeError is the broker's 404 for a missing exchange; errors.Is
// matches ErrNoExchange.
type exchangeError struct{ exchange, vhost string }

func (e *exchangeError) Error() string {
	return fmt.Sprintf("exchange %q does not exist in vhost %q", e.exchange, e.vhost)
}

func (e *exchangeError) Is(target error) bool { return target == ErrNoExchange }
