package outboxurl

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxnats"
)

// NATS URL parameters, beside the TLS ones (see TLSConfig):
//
//	nats://[user:pass@|token@]host[:4222][,host2[:4222]…][?param=value&…]
//
//	token=T              authentication token (instead of userinfo)
//	name=N               connection name shown by the server; defaults to "outbox-relay"
//	max_pending=N        PubAcks in flight (jetstream.WithPublishAsyncMaxPending); defaults to 4000
//	reconnect_wait=D     wait between reconnect attempts (Go duration); defaults to 1s
//	connect_timeout=D    dial and handshake timeout (Go duration); defaults to 5s
//
// Reconnects never stop (nats.MaxReconnects(-1)) and nothing is buffered
// while reconnecting, so a publish during an outage fails at once as
// unavailable instead of waiting for a deadline. A server list none of
// which answers at open is no error either: the first connection is made
// in the background the same way.
const (
	NATSParamToken          = "token"
	NATSParamName           = "name"
	NATSParamMaxPending     = "max_pending"
	NATSParamReconnectWait  = "reconnect_wait"
	NATSParamConnectTimeout = "connect_timeout"
)

// NATS URL defaults.
const (
	NATSDefaultName           = "outbox-relay"
	NATSDefaultMaxPending     = 4000
	NATSDefaultReconnectWait  = time.Second
	NATSDefaultConnectTimeout = 5 * time.Second
	natsDefaultPort           = "4222"
)

func init() { register(openNATS, "nats") }

// openNATS connects to the servers of a nats:// URL and returns a
// JetStream publisher that owns the connection. When no server answers
// it still returns the publisher, connecting in the background: only a
// bad URL or a server refusing the relay is an error.
func openNATS(rawURL string, u *url.URL, opts *Options) (publisher.Publisher, error) {
	fail := func(format string, args ...any) (publisher.Publisher, error) {
		return nil, fmt.Errorf("destination %s: "+format, append([]any{Redact(rawURL)}, args...)...)
	}
	if u.Opaque != "" || u.Host == "" {
		return fail("no host: write nats://host:4222")
	}
	if u.Path != "" && u.Path != "/" {
		return fail("nats URLs take no path (%q)", u.Path)
	}
	if u.Fragment != "" {
		return fail("nats URLs take no fragment")
	}
	servers, err := natsServers(u.Host)
	if err != nil {
		return fail("%v", err)
	}
	q := u.Query()
	if err := checkParams(q, []string{NATSParamToken, NATSParamName, NATSParamMaxPending, NATSParamReconnectWait, NATSParamConnectTimeout}); err != nil {
		return fail("%v", err)
	}
	natsOpts, maxPending, err := natsOptions(q)
	if err != nil {
		return fail("%v", err)
	}
	if natsOpts, err = natsAuth(natsOpts, u, q.Get(NATSParamToken)); err != nil {
		return fail("%v", err)
	}
	tlsCfg, err := serverListTLS(u, opts)
	if err != nil {
		return fail("%v", err)
	}
	if tlsCfg != nil {
		natsOpts = append(natsOpts, nats.Secure(tlsCfg))
	}
	nc, err := natsConnect(rawURL, servers, natsOpts, opts)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(maxPending))
	if err != nil {
		nc.Close()
		return fail("%v", err)
	}
	p, err := outboxnats.New(js, &outboxnats.Config{CloseConn: true, CloudEvents: opts.cloudEvents()})
	if err != nil {
		nc.Close()
		return fail("%v", err)
	}
	return p, nil
}

// natsOptions are the connection's options that the parameters of a
// nats:// URL set, with the defaults for those it leaves out and the
// settings of every relay connection (reconnects that never stop,
// nothing buffered while reconnecting, pings), and the PubAcks it may
// wait for at once.
func natsOptions(q url.Values) (natsOpts []nats.Option, maxPending int, err error) {
	maxPending = NATSDefaultMaxPending
	if v := q.Get(NATSParamMaxPending); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, 0, fmt.Errorf("%s=%q: want a positive integer", NATSParamMaxPending, v)
		}
		maxPending = n
	}
	reconnectWait, err := positiveDuration(q, NATSParamReconnectWait, NATSDefaultReconnectWait)
	if err != nil {
		return nil, 0, err
	}
	connectTimeout, err := positiveDuration(q, NATSParamConnectTimeout, NATSDefaultConnectTimeout)
	if err != nil {
		return nil, 0, err
	}
	name := NATSDefaultName
	if v := q.Get(NATSParamName); v != "" {
		name = v
	}
	natsOpts = []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		nats.ReconnectBufSize(-1),
		nats.Timeout(connectTimeout),
		nats.PingInterval(10 * time.Second),
		nats.MaxPingsOutstanding(3),
		// The default handlers print nothing; keep it so: the relay logs
		// what matters through the publish errors.
		nats.NoCallbacksAfterClientClose(),
	}
	return natsOpts, maxPending, nil
}

// natsAuth adds to natsOpts the credentials of a nats:// URL: a user and
// password, or a token, given as token= or, by the NATS convention, as
// the user alone (nats://token@host). Credentials in both places are an
// error.
func natsAuth(natsOpts []nats.Option, u *url.URL, token string) ([]nats.Option, error) {
	if u.User != nil {
		user := u.User.Username()
		pass, hasPass := u.User.Password()
		switch {
		case token != "":
			return nil, fmt.Errorf("give either credentials in the URL or %s=, not both", NATSParamToken)
		case hasPass:
			natsOpts = append(natsOpts, nats.UserInfo(user, pass))
		case user != "":
			token = user // nats://token@host, the NATS convention
		}
	}
	if token != "" {
		natsOpts = append(natsOpts, nats.Token(token))
	}
	return natsOpts, nil
}

// natsConnect connects to servers. When none answers it connects in the
// background instead, as after a lost connection, and says so once: the
// error is a server that refused the relay.
func natsConnect(rawURL string, servers []string, natsOpts []nats.Option, opts *Options) (*nats.Conn, error) {
	nc, err := nats.Connect(strings.Join(servers, ","), natsOpts...)
	if err != nil && natsUnreachable(err) {
		// No server answers now: connect in the background, as after a
		// lost connection. Publishes fail as unavailable meanwhile, so
		// the relay takes the route down and probes it until a server
		// answers; its other routes are served all along.
		opts.logger().Warn("outboxurl: no NATS server answers; connecting in the background, publishes fail as unavailable until one does",
			"destination", Redact(rawURL), "err", strings.Join(strings.Fields(err.Error()), " "))
		nc, err = nats.Connect(strings.Join(servers, ","), append(natsOpts, nats.RetryOnFailedConnect(true))...)
	}
	if err != nil {
		return nil, &natsConnectError{url: Redact(rawURL), err: err}
	}
	return nc, nil
}

// natsServers splits "h1:4222,h2" into server URLs, adding the default
// port where none is given.
func natsServers(hosts string) ([]string, error) {
	var out []string
	for h := range strings.SplitSeq(hosts, ",") {
		if h == "" {
			return nil, errors.New("empty host in the server list")
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			host, port = strings.Trim(h, "[]"), natsDefaultPort
		}
		if host == "" {
			return nil, fmt.Errorf("host %q has no name", h)
		}
		if !validPort(port) {
			return nil, fmt.Errorf("host %q: bad port", h)
		}
		out = append(out, "nats://"+net.JoinHostPort(host, port))
	}
	return out, nil
}

// natsConnectError is a connection a server refused (authentication,
// TLS); it keeps the cause for errors.Is/As without ever printing
// credentials.
type natsConnectError struct {
	url string
	err error
}

func (e *natsConnectError) Error() string {
	return "destination " + e.url + ": cannot connect to NATS: " + strings.Join(strings.Fields(e.err.Error()), " ")
}

func (e *natsConnectError) Unwrap() error { return e.err }

// natsUnreachable reports whether a failed first connection found no
// server at all (refused, timed out, no route, name not resolved), as
// opposed to a server that refused the relay (authentication, TLS).
func natsUnreachable(err error) bool {
	var op *net.OpError
	var ne net.Error
	return errors.Is(err, nats.ErrNoServers) || (errors.As(err, &op) && op.Op == "dial") ||
		(errors.As(err, &ne) && ne.Timeout())
}
