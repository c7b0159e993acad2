// Package outboxamqp is the RabbitMQ (AMQP 0-9-1) destination, over
// github.com/rabbitmq/amqp091-go.
//
// # URL
//
//	amqp://user:pass@host:5672/vhost     plain TCP (port defaults to 5672)
//	amqps://user:pass@host:5671/vhost    TLS (port defaults to 5671)
//
// The vhost is the path, percent-encoded ("/" is %2F); no path (or "/")
// means the default vhost "/". Without userinfo the RabbitMQ default
// guest/guest is used. New takes no query parameters: the exchange, TLS
// files and heartbeat are Config fields, and outboxurl maps the command
// line's amqp://…?exchange=X&ca_file=… form onto them.
//
// # Wire format
//
// Every message is published to Config.Exchange (default amq.topic) with
// routing key = the envelope's destination (the topic unless the route
// names another), mandatory, and delivery mode 2 (persistent), on a
// channel in publisher-confirm mode. Its properties are:
//
//	message_id    the outbox message id (consumers dedupe by it)
//	content_type  the content-type header (application/json by default)
//	timestamp     when the message was enqueued (seconds)
//	type          the topic
//	app_id        "outbox"
//	headers       every envelope header as a string: outbox-topic,
//	              outbox-business-key (when set), content-type, traceparent
//	              (when the producer had a trace) and the producer's own
//
// The id travels only as the message_id property, as the contract says;
// it is not repeated as a header, since a producer may use any header name
// (message-id included) for its own purposes.
//
// With Config.CloudEvents (format=cloudevents in the URL) every message is
// a CloudEvent in binary content mode instead, per the CloudEvents AMQP
// binding: headers cloudEvents:specversion, cloudEvents:id,
// cloudEvents:source, cloudEvents:type, cloudEvents:time,
// cloudEvents:subject, the content_type property, the plain traceparent
// and the producer's own headers; no outbox-* headers. The properties
// (message_id, type, timestamp, …) stay. See package outboxce.
//
// # Results
//
// A message is delivered when the broker acks it (for a persistent message
// routed to durable queues, after they stored it) and did not return it.
// A message the broker returns as unroutable (basic.return: no queue is
// bound to the exchange with its routing key) fails permanently even
// though an ack follows, and so does every message of a channel the broker
// closed because the exchange does not exist. A nack is transient. A
// message that was sent but not confirmed before the context ended or the
// connection was lost is an unknown outcome (publisher.Unknown). A broker that
// cannot be reached, or that has blocked publishing (resource alarm), makes
// every message of the batch publisher.Unavailable, so that the relay takes down
// the route instead of spending attempts.
//
// The publisher connects on the first Publish and again on the next
// Publish after the connection is lost or a batch timed out; Close
// releases the connection and every goroutine.
package outboxamqp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// Defaults.
const (
	// DefaultExchange is where messages are published unless Config names
	// another: RabbitMQ's built-in topic exchange, present in every vhost.
	DefaultExchange = "amq.topic"
	// DefaultMaxInFlight bounds the messages sent but not yet confirmed.
	DefaultMaxInFlight = 1024
	// DefaultDialTimeout bounds connecting: TCP, TLS, the AMQP handshake
	// and opening the channel.
	DefaultDialTimeout = 10 * time.Second
	// DefaultHeartbeat is the AMQP heartbeat interval asked of the broker;
	// a connection silent for three intervals is considered lost.
	DefaultHeartbeat = 10 * time.Second
	// DefaultPort and DefaultTLSPort are the ports of amqp:// and amqps://
	// URLs that name none.
	DefaultPort    = 5672
	DefaultTLSPort = 5671
)

// AppID is the app_id property of every published message.
const AppID = "outbox"

// maxShortString is the longest AMQP short string: exchange names, routing
// keys, header names and most properties.
const maxShortString = 255

// Errors Publish returns (wrapped, and classified for the relay); test
// them with errors.Is.
var (
	// ErrUnroutable: the broker returned the message because no queue is
	// bound to the exchange with its routing key. Permanent.
	ErrUnroutable = errors.New("unroutable")
	// ErrNoExchange: the exchange does not exist in the vhost. Permanent.
	ErrNoExchange = errors.New("exchange does not exist")
	// ErrNacked: the broker refused responsibility for the message (a
	// negative publisher confirm, e.g. a full queue with
	// x-overflow=reject-publish). Transient.
	ErrNacked = errors.New("broker nacked the message")
	// ErrTooLarge: the message is larger than the broker (or
	// Config.MaxMessageBytes) accepts. Permanent.
	ErrTooLarge = errors.New("message too large")
	// ErrClosed: the publisher was closed.
	ErrClosed = errors.New("outboxamqp: publisher is closed")
)

// Config configures a Publisher. The zero value (or nil) is valid.
type Config struct {
	// Exchange receives every message, with the destination as routing
	// key. It must exist: the publisher declares nothing. Defaults to
	// DefaultExchange (amq.topic).
	Exchange string
	// TLS is the TLS configuration of amqps:// connections, or of amqp://
	// ones when set. Certificate verification is the caller's to keep on.
	// Defaults to nil: system roots for amqps://, no TLS for amqp://.
	TLS *tls.Config
	// Connect, when set, opens every connection instead of dialing the URL
	// (which may then be ""), for callers that configure amqp091-go
	// themselves. It must honour ctx. The publisher owns and closes the
	// connections it returns. Defaults to nil.
	Connect func(ctx context.Context) (*amqp.Connection, error)
	// MaxInFlight bounds the messages sent but not yet confirmed; a batch
	// larger than it is pipelined through that window. Defaults to
	// DefaultMaxInFlight (1024).
	MaxInFlight int
	// DialTimeout bounds connecting, from TCP to the confirm-mode channel.
	// Defaults to DefaultDialTimeout (10 s).
	DialTimeout time.Duration
	// Heartbeat is the AMQP heartbeat interval. Defaults to
	// DefaultHeartbeat (10 s).
	Heartbeat time.Duration
	// MaxMessageBytes makes larger payloads fail permanently without being
	// sent. Defaults to 0: only the broker's limit (max_message_size)
	// applies, and a message the broker rejects for its size fails
	// permanently too.
	MaxMessageBytes int
	// ConnectionName is shown in the RabbitMQ management UI. Defaults to
	// "outbox relay".
	ConnectionName string
	// CloudEvents, when set, publishes every message as a CloudEvent in
	// binary content mode (AMQP protocol binding: cloudEvents: headers,
	// datacontenttype as the content_type property; message_id stays),
	// see package outboxce. Defaults to nil, the plain wire.
	CloudEvents *outboxce.Format
}

// Publisher publishes to one RabbitMQ exchange over one connection and one
// confirm-mode channel, reconnecting as needed. It is safe for concurrent
// use; Publish calls take turns, each pipelining its whole batch.
type Publisher struct {
	addr        string // host:port
	redacted    string // the URL without password, for errors
	user, pass  string
	vhost       string
	exchange    string
	tls         *tls.Config
	connect     func(ctx context.Context) (*amqp.Connection, error)
	maxInFlight int
	dialTimeout time.Duration
	heartbeat   time.Duration
	connName    string
	ce          *outboxce.Format // nil: the plain wire
	maxBytes    atomic.Int64     // 0: unknown; learnt from the broker or Config

	turn     chan struct{} // one Publish at a time
	closeCtx context.Context
	stop     context.CancelFunc
	wg       sync.WaitGroup // dispatchers, writers, teardowns

	mu     sync.Mutex
	sess   *session
	closed bool
}

var _ publisher.Publisher = (*Publisher)(nil)

// New returns a Publisher for the broker at rawURL (see the package
// documentation for its form). It does not connect: the first Publish
// does. Errors name the bad field and never contain the password.
func New(rawURL string, cfg *Config) (*Publisher, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	p := &Publisher{
		exchange:    cfg.Exchange,
		tls:         cfg.TLS,
		connect:     cfg.Connect,
		maxInFlight: cfg.MaxInFlight,
		dialTimeout: cfg.DialTimeout,
		heartbeat:   cfg.Heartbeat,
		connName:    cfg.ConnectionName,
		ce:          cfg.CloudEvents,
		turn:        make(chan struct{}, 1),
	}
	switch {
	case cfg.CloudEvents.Validate() != nil:
		return nil, fmt.Errorf("outboxamqp: Config.CloudEvents: %v", cfg.CloudEvents.Validate())
	case cfg.CloudEvents.IsStructured():
		return nil, errors.New("outboxamqp: Config.CloudEvents: structured mode is for webhooks; use binary mode")
	case cfg.MaxInFlight < 0:
		return nil, errors.New("outboxamqp: MaxInFlight must not be negative")
	case cfg.DialTimeout < 0:
		return nil, errors.New("outboxamqp: DialTimeout must not be negative")
	case cfg.Heartbeat < 0 || (cfg.Heartbeat > 0 && cfg.Heartbeat < time.Second):
		return nil, errors.New("outboxamqp: Heartbeat must be at least 1s")
	case cfg.MaxMessageBytes < 0:
		return nil, errors.New("outboxamqp: MaxMessageBytes must not be negative")
	case len(cfg.Exchange) > maxShortString:
		return nil, errors.New("outboxamqp: Exchange is longer than 255 bytes")
	}
	if p.exchange == "" {
		p.exchange = DefaultExchange
	}
	if p.maxInFlight == 0 {
		p.maxInFlight = DefaultMaxInFlight
	}
	if p.dialTimeout == 0 {
		p.dialTimeout = DefaultDialTimeout
	}
	if p.heartbeat == 0 {
		p.heartbeat = DefaultHeartbeat
	}
	if p.connName == "" {
		p.connName = "outbox relay"
	}
	p.maxBytes.Store(int64(cfg.MaxMessageBytes))
	if rawURL == "" && cfg.Connect != nil {
		p.redacted = "amqp (Config.Connect)"
	} else if err := p.parseURL(rawURL); err != nil {
		return nil, err
	}
	p.closeCtx, p.stop = context.WithCancel(context.Background())
	return p, nil
}

// parseURL fills the connection fields from an amqp:// or amqps:// URL.
func (p *Publisher) parseURL(rawURL string) error {
	p.redacted = redact(rawURL)
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("outboxamqp: %s is not a valid URL", p.redacted)
	}
	secure := false
	switch strings.ToLower(u.Scheme) {
	case "amqp":
	case "amqps":
		secure = true
	default:
		return fmt.Errorf("outboxamqp: %s: scheme must be amqp or amqps", p.redacted)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("outboxamqp: %s has no host", p.redacted)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("outboxamqp: %s: New takes no query parameters; set them in Config (outboxurl.Open understands exchange=, TLS and heartbeat= parameters)", p.redacted)
	}
	port := u.Port()
	if port == "" {
		port = strconv.Itoa(DefaultPort)
		if secure {
			port = strconv.Itoa(DefaultTLSPort)
		}
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("outboxamqp: %s: bad port %q", p.redacted, port)
	}
	p.addr = net.JoinHostPort(u.Hostname(), port)
	p.user, p.pass = "guest", "guest"
	if u.User != nil {
		p.user = u.User.Username()
		p.pass, _ = u.User.Password()
	}
	p.vhost = "/"
	if path := u.EscapedPath(); path != "" && path != "/" {
		v, err := url.PathUnescape(path[1:])
		if err != nil || strings.Contains(path[1:], "/") {
			return fmt.Errorf("outboxamqp: %s: the vhost must be one path segment (write / as %%2F)", p.redacted)
		}
		p.vhost = v
	}
	if secure && p.tls == nil {
		p.tls = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if p.tls != nil {
		p.tls = p.tls.Clone()
		if p.tls.ServerName == "" {
			p.tls.ServerName = u.Hostname()
		}
	}
	return nil
}

// Exchange returns the exchange messages are published to.
func (p *Publisher) Exchange() string { return p.exchange }

// Publish sends the batch pipelined on the confirm-mode channel, at most
// MaxInFlight unconfirmed at a time, and waits for every confirm or for
// ctx. Messages go out in batch order. Results are in batch order.
func (p *Publisher) Publish(ctx context.Context, batch []*publisher.Envelope) []error {
	errs := make([]error, len(batch))
	fill := func(err error) {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	if len(batch) == 0 {
		return errs
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		fill(ErrClosed)
		return errs
	}
	if ctx.Err() != nil {
		fill(p.notSent(ctx))
		return errs
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(p.closeCtx, cancel)()

	select {
	case p.turn <- struct{}{}:
		defer func() { <-p.turn }()
	case <-ctx.Done():
		fill(p.notSent(ctx))
		return errs
	}

	var todo []int
	for i, env := range batch {
		if err := p.check(env); err != nil {
			errs[i] = err
			continue
		}
		todo = append(todo, i)
	}
	if len(todo) == 0 {
		return errs
	}
	s, err := p.session(ctx)
	if err != nil {
		fill(err)
		return errs
	}
	if reason := s.blockedReason(); reason != "" {
		fill(publisher.Unavailable(fmt.Errorf("broker %s blocked publishing: %s", p.redacted, reason)))
		return errs
	}
	p.publish(ctx, s, batch, todo, errs)
	return errs
}

// notSent is the error of a message that was never sent because ctx ended
// first. It does not wrap ctx's error: nothing went out, so the outcome is
// not unknown.
func (p *Publisher) notSent(ctx context.Context) error {
	if errors.Is(context.Cause(ctx), context.Canceled) && p.closeCtx.Err() != nil {
		return ErrClosed
	}
	return fmt.Errorf("not sent: %v", ctx.Err())
}

// check refuses, permanently, what the broker could never accept.
func (p *Publisher) check(env *publisher.Envelope) error {
	switch {
	case env == nil:
		return publisher.Permanent(errors.New("outboxamqp: nil envelope"))
	case len(env.Destination) > maxShortString:
		return publisher.Permanent(fmt.Errorf("routing key (destination) is longer than %d bytes", maxShortString))
	case len(env.ID) > maxShortString:
		return publisher.Permanent(fmt.Errorf("message id is longer than %d bytes", maxShortString))
	}
	if limit := p.maxBytes.Load(); limit > 0 && int64(len(env.Payload)) > limit {
		return publisher.Permanent(fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(env.Payload), limit))
	}
	for k, v := range env.Headers {
		if k == "" || len(k) > maxShortString {
			return publisher.Permanent(fmt.Errorf("a header name is empty or longer than %d bytes", maxShortString))
		}
		if k == publisher.HeaderContentType && len(v) > maxShortString {
			return publisher.Permanent(fmt.Errorf("content type is longer than %d bytes", maxShortString))
		}
	}
	if p.ce != nil {
		if _, err := p.ce.Headers(outboxce.AMQP, env); err != nil {
			return publisher.Permanent(err)
		}
	}
	return nil
}

// senderSelected reports whether a header name is one of RabbitMQ's
// sender-selected distribution headers (CC, BCC), which route a message to
// further routing keys: routing comes from the route, never from message
// data, so they are not sent.
func senderSelected(name string) bool {
	return strings.EqualFold(name, "cc") || strings.EqualFold(name, "bcc")
}

// message renders an envelope as an AMQP publishing.
func (p *Publisher) message(env *publisher.Envelope) amqp.Publishing {
	headers := env.Headers
	if p.ce != nil {
		headers, _ = p.ce.Headers(outboxce.AMQP, env) // check refused the failures
	}
	h := make(amqp.Table, len(headers))
	for k, v := range headers {
		if senderSelected(k) {
			continue
		}
		h[k] = v
	}
	ts := env.CreatedAt
	if ts.IsZero() {
		ts = time.Now()
	}
	return amqp.Publishing{
		Headers:      h,
		ContentType:  env.Headers[publisher.HeaderContentType],
		DeliveryMode: amqp.Persistent,
		MessageId:    env.ID,
		Timestamp:    ts,
		Type:         env.Topic,
		AppId:        AppID,
		Body:         env.Payload,
	}
}

// Close releases the connection and every goroutine; in-progress Publish
// calls return at once with unconfirmed messages as errors. Later Publish
// calls fail with ErrClosed. Close is idempotent and always returns nil:
// the connection is released whether or not the broker answers.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.stop()
	p.turn <- struct{}{} // wait out a running Publish
	p.mu.Lock()
	s := p.sess
	p.sess = nil
	p.mu.Unlock()
	if s != nil {
		_ = s.conn.CloseDeadline(time.Now().Add(closeGrace))
	}
	p.wg.Wait()
	return nil
}

// closeGrace bounds the AMQP close handshake.
const closeGrace = 2 * time.Second

// redact hides the password of an AMQP URL.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if i := strings.LastIndexByte(raw, '@'); i >= 0 {
			if j := strings.Index(raw, "://"); j >= 0 && j < i {
				return raw[:j+3] + "xxxxx" + raw[i:]
			}
			return "xxxxx" + raw[i:]
		}
		return raw
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	u.RawQuery = ""
	u.Fragment = ""
	return u.String()
}
