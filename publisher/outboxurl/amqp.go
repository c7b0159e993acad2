package outboxurl

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxamqp"
)

// RabbitMQ (AMQP 0-9-1) URL parameters, beside the TLS ones (see
// TLSConfig):
//
//	amqp://user:pass@host[:5672]/vhost[?param=value&…]
//	amqps://user:pass@host[:5671]/vhost[?param=value&…]
//
//	exchange=X           exchange to publish to; defaults to amq.topic
//	heartbeat=D          AMQP heartbeat (Go duration, or whole seconds); defaults to 10s
//	connect_timeout=D    connecting, TLS and AMQP handshake included (Go duration); defaults to 10s
//	max_in_flight=N      messages sent and not yet confirmed; defaults to 1024
//	name=N               connection name shown by RabbitMQ; defaults to "outbox relay"
//
// The vhost is the path, percent-encoded (%2F for "/"); none means "/".
// The exchange must exist: the relay declares nothing.
const (
	AMQPParamExchange       = "exchange"
	AMQPParamHeartbeat      = "heartbeat"
	AMQPParamConnectTimeout = "connect_timeout"
	AMQPParamMaxInFlight    = "max_in_flight"
	AMQPParamName           = "name"
)

var amqpParams = []string{AMQPParamExchange, AMQPParamHeartbeat, AMQPParamConnectTimeout, AMQPParamMaxInFlight, AMQPParamName}

func init() { register(openAMQP, "amqp", "amqps") }

// openAMQP returns a RabbitMQ publisher for an amqp:// or amqps:// URL.
// It does not connect: the first publish does.
func openAMQP(rawURL string, u *url.URL, opts *Options) (publisher.Publisher, error) {
	fail := func(format string, args ...any) (publisher.Publisher, error) {
		return nil, fmt.Errorf("destination %s: "+format, append([]any{Redact(rawURL)}, args...)...)
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return fail("no host: write amqp://user:pass@host:5672/vhost")
	}
	if u.Fragment != "" {
		return fail("amqp URLs take no fragment")
	}
	q := u.Query()
	if err := checkParams(q, amqpParams); err != nil {
		return fail("%v", err)
	}
	cfg := &outboxamqp.Config{Exchange: q.Get(AMQPParamExchange), ConnectionName: q.Get(AMQPParamName), CloudEvents: opts.cloudEvents()}
	if q.Has(AMQPParamExchange) && cfg.Exchange == "" {
		return fail("%s= is empty: name an exchange, or leave the parameter out for %s", AMQPParamExchange, outboxamqp.DefaultExchange)
	}
	if v := q.Get(AMQPParamHeartbeat); v != "" {
		d, err := time.ParseDuration(v)
		if n, nerr := strconv.Atoi(v); nerr == nil {
			d, err = time.Duration(n)*time.Second, nil
		}
		if err != nil || d < time.Second {
			return fail("%s=%q: want a duration of at least 1s (e.g. 10s)", AMQPParamHeartbeat, v)
		}
		cfg.Heartbeat = d
	}
	var err error
	if cfg.DialTimeout, err = positiveDuration(q, AMQPParamConnectTimeout, 0); err != nil {
		return fail("%v", err)
	}
	if v := q.Get(AMQPParamMaxInFlight); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fail("%s=%q: want a positive number", AMQPParamMaxInFlight, v)
		}
		cfg.MaxInFlight = n
	}
	if cfg.TLS, err = TLSConfig(u, strings.EqualFold(u.Scheme, "amqps"), opts); err != nil {
		return fail("%v", err)
	}
	base := *u
	base.RawQuery, base.ForceQuery = "", false
	p, err := outboxamqp.New(base.String(), cfg)
	if err != nil {
		return nil, err // names the URL, redacted
	}
	return p, nil
}
