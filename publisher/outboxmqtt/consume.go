package outboxmqtt

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strings"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// Consumer defaults.
const (
	// DefaultConsumeSessionExpiry is how long the broker keeps a consumer's
	// session, and the messages queued for it, while it is disconnected.
	DefaultConsumeSessionExpiry = 24 * time.Hour
	// DefaultReceiveMaximum is how many unacknowledged QoS 1 messages the
	// broker may send a consumer at once.
	DefaultReceiveMaximum = 64
	// DefaultRetryDelay is how long Consume waits after a failed handler,
	// or a lost connection, before it reconnects.
	DefaultRetryDelay = time.Second
)

// ackFlushInterval is how often paho sends the acknowledgements marked
// since the last flush, in the order the messages arrived.
const ackFlushInterval = 10 * time.Millisecond

// ErrNoMessageID: an MQTT message without the message-id user property,
// so not one the relay published; it cannot be deduplicated.
var ErrNoMessageID = errors.New("outboxmqtt: message has no message-id user property")

// ConsumeConfig configures Consume.
type ConsumeConfig struct {
	// Server is the broker: mqtt://host:port or mqtts://host:port, as in
	// DialConfig. Required.
	Server string
	// Username and Password authenticate the connection. They are never
	// logged or put in errors. Default to none.
	Username string
	Password string
	// TLS, when set, is the TLS configuration of the connection, as in
	// DialConfig. Defaults to none for mqtt:// and, for mqtts://, to the
	// system roots and the server's host name.
	TLS *tls.Config
	// ClientID names the consumer's persistent session on the broker: the
	// broker keeps its subscription and queues its messages under this id
	// while it is disconnected. Keep it stable across restarts and unique
	// per consumer instance. Required.
	ClientID string
	// Filter is the topic filter subscribed to at QoS 1, e.g. "order/#"
	// (the relay turns '.' in destinations into '/'), or a shared
	// subscription such as "$share/inventory/order/#". Required.
	Filter string
	// SessionExpiry is how long the broker keeps the session after the
	// connection drops, in whole seconds; messages published meanwhile
	// wait in it. Must be positive: without a session there is no
	// redelivery. Defaults to DefaultConsumeSessionExpiry (24 h).
	SessionExpiry time.Duration
	// ReceiveMaximum bounds the unacknowledged messages the broker sends
	// at once. Defaults to DefaultReceiveMaximum (64).
	ReceiveMaximum uint16
	// RetryDelay is how long Consume waits after a handler error (or a
	// lost connection) before it reconnects to have the broker redeliver.
	// Defaults to DefaultRetryDelay (1 s).
	RetryDelay time.Duration
	// KeepAlive is the MQTT keep alive. Defaults to DefaultKeepAlive (30 s).
	KeepAlive time.Duration
	// ConnectTimeout bounds one connection attempt, SUBACK included.
	// Defaults to DefaultConnectTimeout (10 s).
	ConnectTimeout time.Duration
	// OnSubscribed, when set, is called each time the subscription is in
	// place on a new connection: from then on the broker keeps every
	// matching message for this session. Defaults to none.
	OnSubscribed func()
	// Logger receives handler failures, undecodable messages and
	// connection losses. Defaults to slog.Default().
	Logger *slog.Logger
}

// Decode turns an MQTT PUBLISH the relay sent into an inbox.Message: ID
// from the message-id user property, Topic, Key and ContentType from the
// outbox-topic, outbox-business-key and content-type user properties
// (Topic falls back to the MQTT topic, ContentType to the Content Type
// property), every user property as a header with its name in lower case
// (the first value of a repeated name wins).
//
// A CloudEvent (a route with format=cloudevents: user properties named as
// the attributes; or an application/cloudevents+json payload) decodes
// into the same message: ID from id, Topic from type, Key from subject,
// ContentType from the Content Type property.
func Decode(p *paho.Publish) (*inbox.Message, error) {
	if p == nil {
		return nil, errors.New("outboxmqtt: Decode: nil PUBLISH")
	}
	headers := map[string]string{}
	contentType := ""
	if p.Properties != nil {
		for _, u := range p.Properties.User {
			k := strings.ToLower(u.Key)
			if _, ok := headers[k]; !ok {
				headers[k] = u.Value
			}
		}
		contentType = p.Properties.ContentType
	}
	ce, err := outboxce.MQTT.DecodeEvent(headers, contentType, p.Payload)
	if err != nil {
		return nil, fmt.Errorf("outboxmqtt: topic %s: not a valid CloudEvent: %w", quoted(p.Topic), err)
	}
	if ce != nil {
		return inbox.FromCloudEvent(ce), nil
	}
	id := headers[PropertyMessageID]
	if id == "" {
		return nil, fmt.Errorf("%w (topic %s)", ErrNoMessageID, quoted(p.Topic))
	}
	topic := headers[publisher.HeaderTopic]
	if topic == "" {
		topic = p.Topic
	}
	if v := headers[publisher.HeaderContentType]; v != "" {
		contentType = v
	}
	return &inbox.Message{
		ID:          id,
		Topic:       topic,
		Key:         headers[publisher.HeaderBusinessKey],
		ContentType: contentType,
		Headers:     headers,
		Payload:     p.Payload,
	}, nil
}

// Consume subscribes to cfg.Filter at QoS 1 with a persistent session and
// runs handler on each message, one at a time in arrival order, with ctx
// carrying the producer's trace. A nil from handler acknowledges the
// message (PUBACK); a message Decode rejects is acknowledged and dropped,
// since it would fail the same way every time.
//
// MQTT has no negative acknowledgement: a broker resends an
// unacknowledged QoS 1 message only when the session reconnects. So when
// handler fails, Consume leaves that message (and every later one)
// unacknowledged, waits RetryDelay, disconnects and reconnects with Clean
// Start 0, and the broker delivers the message again. A lost connection
// is handled the same way. Wrap handler with inbox.Handle to apply each
// message exactly once.
//
// Consume returns nil once ctx is done, after disconnecting (the session,
// and with it the subscription, stays on the broker for SessionExpiry).
// It returns an error for a bad configuration, or when the broker refuses
// the connection or the subscription (bad credentials, not authorized);
// network failures are retried until ctx ends.
func Consume(ctx context.Context, cfg *ConsumeConfig, handler func(ctx context.Context, m *inbox.Message) error) error {
	c, err := newConsumer(cfg, handler)
	if err != nil {
		return err
	}
	for {
		err := c.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var fatal *refusedError
		if errors.As(err, &fatal) {
			return err
		}
		if errors.Is(err, errRedeliver) {
			continue // the handler's delay has passed
		}
		if err != nil {
			c.log.Warn("outboxmqtt: consume: reconnecting", "server", c.server, "client_id", c.cfg.ClientID, "in", c.cfg.RetryDelay, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(c.cfg.RetryDelay):
		}
	}
}

// errRedeliver ends a connection after a handler failed, so that the
// next one gets the message again.
var errRedeliver = errors.New("outboxmqtt: consume: reconnecting for redelivery")

// refusedError is a CONNACK or SUBACK refusal: retrying will not help.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// consumer is one Consume call.
type consumer struct {
	cfg     ConsumeConfig
	server  string // scheme://host:port, no credentials
	addr    string
	tls     *tls.Config
	handler func(context.Context, *inbox.Message) error
	log     *slog.Logger
}

func newConsumer(cfg *ConsumeConfig, handler func(context.Context, *inbox.Message) error) (*consumer, error) {
	if cfg == nil || handler == nil {
		return nil, errors.New("outboxmqtt: Consume: nil ConsumeConfig or handler")
	}
	c := &consumer{cfg: *cfg, handler: handler, log: cfg.Logger}
	u, err := parseServer(cfg.Server)
	if err != nil {
		return nil, errors.New(strings.Replace(err.Error(), "DialConfig", "ConsumeConfig", 1))
	}
	switch {
	case cfg.ClientID == "" || len(cfg.ClientID) > maxStringLen || invalidString(cfg.ClientID) != "":
		return nil, errors.New("outboxmqtt: ConsumeConfig.ClientID is required: printable UTF-8, at most 65535 bytes, stable across restarts")
	case cfg.Filter == "" || invalidString(cfg.Filter) != "":
		return nil, errors.New("outboxmqtt: ConsumeConfig.Filter is required: a topic filter such as order/#")
	case cfg.SessionExpiry < 0 || cfg.SessionExpiry > math.MaxUint32*time.Second:
		return nil, errors.New("outboxmqtt: ConsumeConfig.SessionExpiry must be between 1s and 4294967295s")
	case cfg.SessionExpiry > 0 && cfg.SessionExpiry < time.Second:
		return nil, errors.New("outboxmqtt: ConsumeConfig.SessionExpiry must be at least 1s: without a session the broker never redelivers")
	case cfg.KeepAlive < 0 || cfg.KeepAlive > math.MaxUint16*time.Second:
		return nil, errors.New("outboxmqtt: ConsumeConfig.KeepAlive must be between 0 and 65535s")
	case cfg.RetryDelay < 0 || cfg.ConnectTimeout < 0:
		return nil, errors.New("outboxmqtt: ConsumeConfig.RetryDelay and ConnectTimeout must not be negative")
	}
	if c.cfg.SessionExpiry == 0 {
		c.cfg.SessionExpiry = DefaultConsumeSessionExpiry
	}
	if c.cfg.ReceiveMaximum == 0 {
		c.cfg.ReceiveMaximum = DefaultReceiveMaximum
	}
	if c.cfg.RetryDelay == 0 {
		c.cfg.RetryDelay = DefaultRetryDelay
	}
	if c.cfg.KeepAlive == 0 {
		c.cfg.KeepAlive = DefaultKeepAlive
	}
	if c.cfg.ConnectTimeout == 0 {
		c.cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.server, c.addr = u.String(), u.Host
	switch {
	case cfg.TLS != nil:
		c.tls = cfg.TLS
		if !isTLS(u.Scheme) {
			c.server = "mqtts://" + u.Host
		}
	case isTLS(u.Scheme):
		c.tls = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: u.Hostname()}
	}
	return c, nil
}

// dial opens the network connection.
func (c *consumer) dial(ctx context.Context) (net.Conn, error) {
	if c.tls != nil {
		d := &tls.Dialer{Config: c.tls}
		return d.DialContext(ctx, "tcp", c.addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", c.addr)
}

// session runs one connection: connect with Clean Start 0, subscribe,
// handle messages until ctx ends, a handler fails or the connection
// drops. It returns nil when ctx ended, errRedeliver after a handler
// failed.
func (c *consumer) session(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, c.cfg.ConnectTimeout)
	defer cancel()
	conn, err := c.dial(cctx)
	if err != nil {
		return fmt.Errorf("outboxmqtt: consume: connect to %s: %w", c.server, err)
	}
	// Messages go from paho's router to this loop. A PUBLISH that arrives
	// while the loop is winding down is left unacknowledged: the broker
	// sends it again on the next connection.
	msgs := make(chan *paho.Publish, c.cfg.ReceiveMaximum)
	stop := make(chan struct{})
	client := paho.NewClient(paho.ClientConfig{
		Conn:                       conn,
		EnableManualAcknowledgment: true,
		SendAcksInterval:           ackFlushInterval,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			select {
			case msgs <- pr.Packet:
			case <-stop:
			}
			return true, nil
		}},
	})
	expiry := uint32(c.cfg.SessionExpiry / time.Second)
	recvMax := c.cfg.ReceiveMaximum
	cp := &paho.Connect{
		ClientID:   c.cfg.ClientID,
		KeepAlive:  uint16(c.cfg.KeepAlive / time.Second),
		CleanStart: false, // resume the session: its unacknowledged messages come again
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry, ReceiveMaximum: &recvMax},
	}
	if c.cfg.Username != "" {
		cp.Username, cp.UsernameFlag = c.cfg.Username, true
	}
	if c.cfg.Password != "" {
		cp.Password, cp.PasswordFlag = []byte(c.cfg.Password), true
	}
	ca, err := client.Connect(cctx, cp)
	if err != nil {
		close(stop)
		if ca != nil && ca.ReasonCode >= 0x80 {
			return &refusedError{fmt.Errorf("outboxmqtt: consume: %s refused the connection: CONNACK reason 0x%02X", c.server, ca.ReasonCode)}
		}
		return fmt.Errorf("outboxmqtt: consume: connect to %s: %w", c.server, err)
	}
	defer func() {
		close(stop)
		_ = client.Disconnect(&paho.Disconnect{ReasonCode: 0})
	}()
	sa, err := client.Subscribe(cctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: c.cfg.Filter, QoS: 1}}})
	if err != nil {
		if sa != nil && len(sa.Reasons) == 1 && sa.Reasons[0] >= 0x80 {
			return &refusedError{fmt.Errorf("outboxmqtt: consume: %s refused the subscription to %s: SUBACK reason 0x%02X", c.server, quoted(c.cfg.Filter), sa.Reasons[0])}
		}
		return fmt.Errorf("outboxmqtt: consume: subscribe to %s: %w", quoted(c.cfg.Filter), err)
	}
	if len(sa.Reasons) != 1 || sa.Reasons[0] != 1 {
		code := byte(0)
		if len(sa.Reasons) == 1 {
			code = sa.Reasons[0]
		}
		if code >= 0x80 {
			return &refusedError{fmt.Errorf("outboxmqtt: consume: %s refused the subscription to %s: SUBACK reason 0x%02X", c.server, quoted(c.cfg.Filter), code)}
		}
		return &refusedError{fmt.Errorf("outboxmqtt: consume: %s granted QoS %d for %s; QoS 1 is needed for redelivery", c.server, code, quoted(c.cfg.Filter))}
	}
	if c.cfg.OnSubscribed != nil {
		c.cfg.OnSubscribed()
	}
	for {
		select {
		case <-ctx.Done():
			flushAcks()
			return nil
		case <-client.Done():
			return fmt.Errorf("outboxmqtt: consume: connection to %s lost", c.server)
		case p := <-msgs:
			if err := c.deliver(ctx, client, p); err != nil {
				// Stay connected for the delay, so the acknowledgements of
				// earlier messages go out; then reconnect for the redelivery.
				select {
				case <-ctx.Done():
				case <-client.Done():
				case <-time.After(c.cfg.RetryDelay):
				}
				return errRedeliver
			}
		}
	}
}

// flushAcks gives paho's acknowledgement flush time to send what was
// acknowledged before the connection is closed; what it misses is
// redelivered, harmlessly, on the next connection.
func flushAcks() { time.Sleep(3 * ackFlushInterval) }

// deliver runs the handler on one message and acknowledges it unless the
// handler failed, which it returns.
func (c *consumer) deliver(ctx context.Context, client *paho.Client, p *paho.Publish) error {
	m, err := Decode(p)
	if err != nil {
		c.log.Error("outboxmqtt: consume: cannot decode; acknowledging and dropping the message", "topic", p.Topic, "err", err)
		c.ack(client, p, "")
		return nil
	}
	if err := c.handler(m.Context(ctx), m); err != nil {
		c.log.Warn("outboxmqtt: consume: handler failed; reconnecting for the broker to redeliver", "message_id", m.ID, "topic", m.Topic, "in", c.cfg.RetryDelay, "err", err)
		return err
	}
	c.ack(client, p, m.ID)
	return nil
}

func (c *consumer) ack(client *paho.Client, p *paho.Publish, id string) {
	if err := client.Ack(p); err != nil {
		c.log.Warn("outboxmqtt: consume: ack failed; the message may be redelivered", "message_id", id, "err", err)
	}
}
