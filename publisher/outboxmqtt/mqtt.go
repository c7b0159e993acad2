// Package outboxmqtt is the MQTT 5 destination: it publishes every message
// at QoS 1 to an MQTT broker and counts it delivered on a successful
// PUBACK. It wraps github.com/eclipse/paho.golang's autopaho connection
// manager, which reconnects by itself.
//
// # URL
//
// The outbox command line opens it with (see package outboxurl):
//
//	mqtt://[user:pass@]host[:1883][?client_id=…&keepalive=30s&session_expiry=0s&clean_start=true&max_inflight=64]
//	mqtts://[user:pass@]host[:8883][?ca_file=…&cert_file=…&key_file=…&server_name=…]
//
// Go programs either Dial a broker or hand New a connection manager they
// already run.
//
// # Wire format
//
// A message with destination "order.created" is published to the MQTT
// topic "order/created" ('.' becomes '/', see Topic) at QoS 1, not
// retained, payload byte for byte. It carries these MQTT 5 properties:
//
//	user property message-id           the message id (consumers dedupe by it)
//	user property outbox-topic         the outbox topic
//	user property outbox-business-key  the business key, when set
//	user property content-type         the content type
//	user property traceparent          when the producer had a trace
//	user property <name>               every other header of the message
//	Content Type                       the content type, again
//
// With Config.CloudEvents (format=cloudevents in the URL) every message is
// a CloudEvent in binary content mode instead, per the CloudEvents MQTT 5
// binding: user properties specversion, id, source, type, time, subject
// and traceparent, the Content Type property, and the producer's headers,
// which must then be named like attributes (lower-case letters and
// digits); no message-id or outbox-* properties. The claim-check and seal
// headers of a route passing references or sealed payloads travel as the
// extensions outboxclaimcheck, outboxclaimsize, outboxclaimsha256,
// outboxseal, outboxsealkey and outboxsealheaders, which Decode reads back
// under their own names (outboxce.OutboxExtension). See package outboxce.
//
// # Results
//
// A PUBACK with a reason code below 0x80 means delivered; 0x10 "no
// matching subscribers" is a success in MQTT 5, since the broker took the
// message. Reason codes not authorized (0x87), topic name invalid (0x90)
// and payload format invalid (0x99) are permanent; the others (quota
// exceeded 0x97, implementation specific 0x83, …) are retried. A topic that
// MQTT cannot carry ('+', '#', NUL, control characters, a leading '$',
// empty, over 65535 bytes) and a message larger than the server's maximum
// packet size are permanent and never sent. While the connection is down
// every message fails as unavailable, so the relay takes the route down
// without counting attempts; a message whose connection dropped, or whose
// PUBACK did not come in time, after it was written is an unknown outcome.
//
// MQTT has no notion of a destination that does not exist: a broker takes
// any valid topic, with or without subscribers.
//
// # Consuming
//
// Consume subscribes at QoS 1 with a persistent session and hands each
// message, decoded by Decode, to a handler as an *inbox.Message,
// acknowledging it only after the handler returned nil. MQTT redelivers an
// unacknowledged message only when the session reconnects, so after a
// handler error Consume reconnects (Clean Start 0) to get it again. Wrap
// the handler with inbox.Handle to apply each message exactly once.
package outboxmqtt

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
	"github.com/eclipse/paho.golang/paho/session/state"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// Defaults.
const (
	// DefaultMaxInFlight bounds how many PUBLISH packets of a batch await
	// their PUBACK at once (never more than the server's Receive Maximum).
	DefaultMaxInFlight = 64
	// DefaultKeepAlive is the MQTT keep alive of a dialled connection.
	DefaultKeepAlive = 30 * time.Second
	// DefaultConnectTimeout bounds one connection attempt, CONNACK
	// included.
	DefaultConnectTimeout = 10 * time.Second
	// DefaultConnectWait is how long Publish waits for a connection that
	// is down before failing the batch as unavailable.
	DefaultConnectWait = 2 * time.Second
	// ClientIDPrefix starts every generated client identifier.
	ClientIDPrefix = "outbox-"
)

// Config configures a Publisher. The zero value (or nil) is valid.
type Config struct {
	// MaxInFlight bounds how many PUBLISH packets of one batch await their
	// PUBACK at once. A dialled publisher never exceeds the Receive
	// Maximum the server announced; with New, keep it at or below the
	// server's, or the excess waits inside paho against its packet
	// timeout. Defaults to DefaultMaxInFlight (64).
	MaxInFlight int
	// ConnectWait is how long Publish waits for a connection that is down
	// before failing the batch as unavailable. Defaults to
	// DefaultConnectWait (2 s).
	ConnectWait time.Duration
	// Logger receives connection state changes of a dialled publisher.
	// Defaults to slog.Default().
	Logger *slog.Logger
	// CloudEvents, when set, publishes every message as a CloudEvent in
	// binary content mode (MQTT 5 protocol binding: user properties named
	// as the attributes, datacontenttype as the Content Type property),
	// see package outboxce. Producer headers must then be valid attribute
	// names (lower-case letters and digits). Defaults to nil, the plain
	// wire.
	CloudEvents *outboxce.Format
}

// Publisher publishes messages to one MQTT 5 broker at QoS 1. It is safe
// for concurrent use.
type Publisher struct {
	cm          *autopaho.ConnectionManager
	own         bool         // Dial made cm: Close disconnects it
	session     *state.State // the session of a dialled publisher
	maxInFlight int
	connectWait time.Duration
	ce          *outboxce.Format // nil: the plain wire
	log         *slog.Logger
	server      string // for messages: scheme://host:port, no credentials

	// Connection state, tracked for a dialled publisher only.
	connMu     sync.Mutex
	conn       context.Context // cancelled with errLoss when it drops; nil while down
	connCancel context.CancelCauseFunc
	up         chan struct{} // closed when a connection comes up
	recvMax    atomic.Int32  // server's Receive Maximum; 0 unknown
	maxPacket  atomic.Uint32 // server's Maximum Packet Size; 0 unlimited or unknown
	lastErr    string        // why the last connection attempt failed; "" once connected

	mu     sync.RWMutex
	closed bool
	busy   sync.WaitGroup // Publish calls in progress
	stop   context.Context
	cancel context.CancelFunc
}

var _ publisher.Publisher = (*Publisher)(nil)

// New returns a Publisher over a connection manager the caller runs (and
// disconnects: Close leaves cm alone). cm must speak MQTT 5, which
// autopaho always does.
//
// New does not learn of connection loss: a message in flight when the
// connection drops ends, as an unknown outcome, when paho's PacketTimeout
// (10 s by default) or the Publish context expires. Dial tracks the
// connection and ends it at once.
func New(cm *autopaho.ConnectionManager, cfg *Config) (*Publisher, error) {
	if cm == nil {
		return nil, errors.New("outboxmqtt: nil connection manager")
	}
	p, err := newPublisher(cfg)
	if err != nil {
		return nil, err
	}
	p.cm = cm
	p.server = "mqtt broker"
	return p, nil
}

func newPublisher(cfg *Config) (*Publisher, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	switch {
	case cfg.MaxInFlight < 0:
		return nil, errors.New("outboxmqtt: Config.MaxInFlight must not be negative")
	case cfg.ConnectWait < 0:
		return nil, errors.New("outboxmqtt: Config.ConnectWait must not be negative")
	case cfg.CloudEvents.Validate() != nil:
		return nil, fmt.Errorf("outboxmqtt: Config.CloudEvents: %v", cfg.CloudEvents.Validate())
	case cfg.CloudEvents.IsStructured():
		return nil, errors.New("outboxmqtt: Config.CloudEvents: structured mode is for webhooks; use binary mode")
	}
	p := &Publisher{
		ce:          cfg.CloudEvents,
		maxInFlight: cfg.MaxInFlight,
		connectWait: cfg.ConnectWait,
		log:         cfg.Logger,
		up:          make(chan struct{}),
	}
	if p.maxInFlight == 0 {
		p.maxInFlight = DefaultMaxInFlight
	}
	if p.connectWait == 0 {
		p.connectWait = DefaultConnectWait
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	p.stop, p.cancel = context.WithCancel(context.Background())
	return p, nil
}

// DialConfig configures Dial.
type DialConfig struct {
	// Server is the broker: mqtt://host:port, or mqtts://host:port for TLS
	// (tls:// and ssl:// are synonyms). The port defaults to 1883, or 8883
	// with TLS. Required.
	Server string
	// Username and Password authenticate the connection. They are never
	// logged or put in errors. Default to none.
	Username string
	Password string
	// TLS, when set, is the TLS configuration of the connection, which
	// then uses TLS whatever Server's scheme. Defaults to none for mqtt://
	// and, for mqtts://, to the system roots and the server's host name.
	// Verification is never skipped.
	TLS *tls.Config
	// ClientID identifies the connection to the broker; it must be unique
	// among the broker's clients (a second connection with the same id
	// takes the first one over). Defaults to ClientIDPrefix and 16 random
	// hex digits, kept for the Publisher's whole life, reconnections
	// included.
	ClientID string
	// KeepAlive is the MQTT keep alive, in whole seconds up to 65535 s.
	// Defaults to DefaultKeepAlive (30 s).
	KeepAlive time.Duration
	// SessionExpiry is how long the broker keeps the session after the
	// connection drops, in whole seconds. A publisher's session holds only
	// its unacknowledged QoS 1 messages, which the client sends again if it
	// reconnects in time. Defaults to 0: the session ends with the
	// connection.
	SessionExpiry time.Duration
	// ResumeSession connects the first time with Clean Start 0, taking up
	// a session the broker kept for ClientID. Defaults to false: the first
	// connection starts clean (reconnections always resume).
	ResumeSession bool
	// ConnectTimeout bounds one connection attempt. Defaults to
	// DefaultConnectTimeout (10 s).
	ConnectTimeout time.Duration
	// Config holds the settings New takes too.
	Config
}

// Dial returns a Publisher with its own connection manager, which connects
// in the background and reconnects whenever the connection drops until
// Close. Dial does not wait for the connection: while it is down, Publish
// fails as unavailable. Errors name the bad field and never contain the
// password.
func Dial(cfg *DialConfig) (*Publisher, error) {
	if cfg == nil {
		return nil, errors.New("outboxmqtt: DialConfig.Server is required")
	}
	server, err := parseServer(cfg.Server)
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.KeepAlive < 0 || cfg.KeepAlive > math.MaxUint16*time.Second:
		return nil, errors.New("outboxmqtt: DialConfig.KeepAlive must be between 0 and 65535s")
	case cfg.SessionExpiry < 0 || cfg.SessionExpiry > math.MaxUint32*time.Second:
		return nil, errors.New("outboxmqtt: DialConfig.SessionExpiry must be between 0 and 4294967295s")
	case cfg.ConnectTimeout < 0:
		return nil, errors.New("outboxmqtt: DialConfig.ConnectTimeout must not be negative")
	case len(cfg.ClientID) > maxStringLen || invalidString(cfg.ClientID) != "":
		return nil, errors.New("outboxmqtt: DialConfig.ClientID must be printable UTF-8 of at most 65535 bytes")
	}
	p, err := newPublisher(&cfg.Config)
	if err != nil {
		return nil, err
	}
	p.own = true
	if cfg.TLS != nil && !isTLS(server.Scheme) {
		server.Scheme = "mqtts"
	}
	p.server = server.String()
	clientID := cfg.ClientID
	if clientID == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		clientID = ClientIDPrefix + hex.EncodeToString(b)
	}
	keepAlive := cfg.KeepAlive
	if keepAlive == 0 {
		keepAlive = DefaultKeepAlive
	}
	connectTimeout := cfg.ConnectTimeout
	if connectTimeout == 0 {
		connectTimeout = DefaultConnectTimeout
	}
	p.session = state.NewInMemory()
	acfg := autopaho.ClientConfig{
		ServerUrls:                    []*url.URL{server},
		TlsCfg:                        cfg.TLS,
		KeepAlive:                     uint16(keepAlive / time.Second),
		CleanStartOnInitialConnection: !cfg.ResumeSession,
		SessionExpiryInterval:         uint32(cfg.SessionExpiry / time.Second),
		ReconnectBackoff:              autopaho.NewExponentialBackoff(100*time.Millisecond, 5*time.Second, 500*time.Millisecond, 2),
		ConnectTimeout:                connectTimeout,
		ConnectUsername:               cfg.Username,
		ConnectPassword:               []byte(cfg.Password),
		OnConnectionUp:                p.connectionUp,
		OnConnectionDown:              p.connectionDown,
		OnConnectError:                p.connectError,
		ClientConfig: paho.ClientConfig{
			ClientID: clientID,
			Session:  p.session,
			// Nothing is subscribed; a stray PUBLISH is acknowledged and dropped.
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(paho.PublishReceived) (bool, error) { return true, nil }},
		},
	}
	if cfg.TLS == nil && isTLS(server.Scheme) {
		acfg.TlsCfg = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: server.Hostname()}
	}
	cm, err := autopaho.NewConnection(p.stop, acfg)
	if err != nil {
		p.cancel()
		return nil, fmt.Errorf("outboxmqtt: %s: %v", p.server, err)
	}
	p.cm = cm
	return p, nil
}

func isTLS(scheme string) bool {
	switch scheme {
	case "mqtts", "tls", "ssl":
		return true
	}
	return false
}

// parseServer checks a broker address and fills in the default port.
func parseServer(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("outboxmqtt: DialConfig.Server is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("outboxmqtt: DialConfig.Server is not a URL")
	}
	u.Scheme = strings.ToLower(u.Scheme)
	switch {
	case u.Scheme != "mqtt" && u.Scheme != "tcp" && !isTLS(u.Scheme):
		return nil, fmt.Errorf("outboxmqtt: DialConfig.Server: scheme %q: want mqtt or mqtts", u.Scheme)
	case u.User != nil:
		return nil, errors.New("outboxmqtt: DialConfig.Server: put credentials in Username and Password, not in the URL")
	case u.Hostname() == "":
		return nil, errors.New("outboxmqtt: DialConfig.Server has no host")
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("outboxmqtt: DialConfig.Server %s: want scheme://host:port only", u.Redacted())
	}
	host := u.Host
	if u.Port() == "" {
		port := "1883"
		if isTLS(u.Scheme) {
			port = "8883"
		}
		host = strings.TrimSuffix(host, ":") + ":" + port
	}
	return &url.URL{Scheme: u.Scheme, Host: host}, nil
}

// connectionUp is autopaho's OnConnectionUp: it must not block.
func (p *Publisher) connectionUp(_ *autopaho.ConnectionManager, ca *paho.Connack) {
	recvMax, maxPacket := int32(math.MaxUint16), uint32(0)
	if ca != nil && ca.Properties != nil {
		if ca.Properties.ReceiveMaximum != nil {
			recvMax = int32(*ca.Properties.ReceiveMaximum)
		}
		if ca.Properties.MaximumPacketSize != nil {
			maxPacket = *ca.Properties.MaximumPacketSize
		}
	}
	p.recvMax.Store(recvMax)
	p.maxPacket.Store(maxPacket)
	p.connMu.Lock()
	p.conn, p.connCancel = context.WithCancelCause(context.Background())
	p.lastErr = ""
	select {
	case <-p.up: // already up: autopaho reports each connection once
	default:
		close(p.up)
	}
	p.connMu.Unlock()
	p.log.Info("outboxmqtt: connected", "server", p.server, "receive_maximum", recvMax, "maximum_packet_size", maxPacket)
}

// connectionDown is autopaho's OnConnectionDown: it ends every publish
// still waiting for a PUBACK on the lost connection.
func (p *Publisher) connectionDown() bool {
	p.connMu.Lock()
	if p.connCancel != nil {
		p.connCancel(errLoss)
	}
	p.conn, p.connCancel = nil, nil
	p.up = make(chan struct{})
	p.connMu.Unlock()
	if p.stop.Err() == nil {
		p.log.Warn("outboxmqtt: connection lost; reconnecting", "server", p.server)
	}
	return true
}

// connectError is autopaho's OnConnectError. The first failure of a
// streak is a warning, the rest debug; the last one explains later
// "not connected" errors.
func (p *Publisher) connectError(err error) {
	msg := strings.TrimPrefix(strings.Join(strings.Fields(err.Error()), " "), "failed to connect to "+p.server+": ")
	p.connMu.Lock()
	first := p.lastErr == ""
	p.lastErr = msg
	p.connMu.Unlock()
	level := slog.LevelDebug
	if first && p.stop.Err() == nil {
		level = slog.LevelWarn
	}
	p.log.Log(context.Background(), level, "outboxmqtt: cannot connect; retrying", "server", p.server, "err", msg)
}

// notConnected is the error of a batch that found no connection.
func (p *Publisher) notConnected() error {
	p.connMu.Lock()
	why := p.lastErr
	p.connMu.Unlock()
	if why != "" {
		why = ": last attempt: " + why
	}
	return publisher.Unavailable(fmt.Errorf("mqtt: not connected to %s (waited %v)%s", p.server, p.connectWait, why))
}

// awaitConnection waits at most ConnectWait for the connection and returns
// a context cancelled when that connection drops.
func (p *Publisher) awaitConnection(ctx context.Context) (context.Context, error) {
	ctx, cancel := context.WithTimeout(ctx, p.connectWait)
	defer cancel()
	if !p.own {
		if err := p.cm.AwaitConnection(ctx); err != nil {
			return nil, err
		}
		return context.Background(), nil
	}
	for {
		p.connMu.Lock()
		conn, up := p.conn, p.up
		p.connMu.Unlock()
		if conn != nil && conn.Err() == nil {
			return conn, nil
		}
		select {
		case <-up:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// inFlight is how many PUBLISH packets may await a PUBACK at once.
func (p *Publisher) inFlight() int {
	n := p.maxInFlight
	if m := int(p.recvMax.Load()); m > 0 {
		n = min(n, m)
	}
	return max(n, 1)
}

// Publish sends every envelope of the batch at QoS 1, up to MaxInFlight
// (and the server's Receive Maximum) awaiting their PUBACK at once, and
// returns the results in batch order.
func (p *Publisher) Publish(ctx context.Context, batch []*publisher.Envelope) []error {
	errs := make([]error, len(batch))
	p.mu.RLock()
	if p.closed {
		p.mu.RUnlock()
		for i := range errs {
			errs[i] = errors.New("outboxmqtt: publisher is closed")
		}
		return errs
	}
	p.busy.Add(1)
	p.mu.RUnlock()
	defer p.busy.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(p.stop, cancel)()

	pubs := make([]*paho.Publish, len(batch))
	todo := make([]int, 0, len(batch))
	maxPacket := p.maxPacket.Load()
	for i, env := range batch {
		pub, err := packet(env, maxPacket, p.ce)
		if err != nil {
			errs[i] = err
			continue
		}
		pubs[i] = pub
		todo = append(todo, i)
	}
	if len(todo) == 0 {
		return errs
	}
	notSent := func(err error) {
		for _, i := range todo {
			errs[i] = err
		}
	}
	if err := ctx.Err(); err != nil {
		notSent(fmt.Errorf("mqtt: not sent: %w", err))
		return errs
	}
	conn, err := p.awaitConnection(ctx)
	if err != nil {
		if ctx.Err() != nil {
			notSent(fmt.Errorf("mqtt: not sent: %w", ctx.Err()))
		} else {
			notSent(p.notConnected())
		}
		return errs
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(p.inFlight(), len(todo)) {
		wg.Go(func() {
			for {
				n := int(next.Add(1) - 1)
				if n >= len(todo) {
					return
				}
				i := todo[n]
				if err := ctx.Err(); err != nil {
					errs[i] = fmt.Errorf("mqtt: not sent: %w", err)
					continue
				}
				errs[i] = p.send(ctx, conn, pubs[i])
			}
		})
	}
	wg.Wait()
	return errs
}

// send publishes one packet and waits for its PUBACK, the connection's
// loss or ctx.
func (p *Publisher) send(ctx, conn context.Context, pub *paho.Publish) error {
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(conn, func() { cancel(errLoss) })()
	resp, err := p.cm.Publish(pctx, pub)
	return classify(pctx, pub.Topic, resp, err)
}

// Close makes later Publish calls fail, ends those in progress (their
// unconfirmed messages fail as unknown outcomes) and, for a dialled
// publisher, disconnects from the broker and stops every goroutine. A
// connection manager given to New stays up.
func (p *Publisher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.busy.Wait()
	if !p.own {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := p.cm.Disconnect(ctx)
	_ = p.session.Close()
	if err != nil {
		return fmt.Errorf("outboxmqtt: disconnect from %s: %w", p.server, err)
	}
	return nil
}
