// Package outboxurl opens a destination publisher from a URL, the form the
// outbox command line and configuration file use (--to, --route).
//
// Schemes: stdout:// (one JSON line per message, see outboxstdout), http://
// and https:// (signed webhooks, see outboxwebhook), and the brokers, each
// in its own file of this package. The cloud services (sqs://, sns://,
// kinesis://, pubsub://) have publishers in modules of their own, so that
// their SDKs stay out of programs that do not use them: a program opens
// them after registering them with Register (the outbox command registers
// all four). A scheme of the contract that is not served is refused with an
// error saying so.
package outboxurl

import (
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
	"github.com/txoutbox/outbox/publisher/outboxstdout"
	"github.com/txoutbox/outbox/publisher/outboxwebhook"
)

// Options carries what a URL does not: secrets and timeouts from the
// command line's configuration. A nil *Options is the zero value.
type Options struct {
	// WebhookSecret signs http and https deliveries (see
	// outboxwebhook.Config.Secret). The caller resolves
	// OUTBOX_WEBHOOK_SECRET; Open reads no environment. Defaults to "",
	// unsigned.
	WebhookSecret string
	// WebhookAllowShortSecret accepts a WebhookSecret shorter than
	// outboxwebhook.MinSecretBytes (see
	// outboxwebhook.Config.AllowShortSecret). Defaults to false.
	WebhookAllowShortSecret bool
	// WebhookMaxRetryAfter caps the wait a webhook's Retry-After can ask
	// for (outboxwebhook.Config.MaxRetryAfter). Defaults to
	// outboxwebhook.MaxRetryAfter (1 h).
	WebhookMaxRetryAfter time.Duration
	// Timeout bounds each HTTP request. Defaults to
	// outboxwebhook.DefaultTimeout (10 s).
	Timeout time.Duration
	// Stdout receives stdout:// output. Defaults to os.Stdout.
	Stdout io.Writer
	// TLS, when set, is the TLS configuration for broker connections; it
	// wins over the URL's TLS parameters (see TLSConfig).
	TLS *tls.Config
	// Logger receives what an opener has to say besides its error: a
	// broker that does not answer at open (the publisher is returned all
	// the same, and connects in the background). Defaults to discarding.
	Logger *slog.Logger

	// ce is the URL's format and ce_source (see outboxce), taken out of
	// the URL by Open; nil for the plain wire.
	ce *outboxce.Format
}

// logger returns o.Logger, or a logger that discards.
func (o *Options) logger() *slog.Logger {
	if o == nil || o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

// cloudEvents returns the URL's CloudEvents format; nil for the plain wire
// or a nil o.
func (o *Options) cloudEvents() *outboxce.Format {
	if o == nil {
		return nil
	}
	return o.ce
}

// Supported lists the schemes Open accepts.
var Supported = []string{"stdout", "http", "https"}

// opener builds a broker publisher from its parsed URL; rawURL is for
// messages (always through Redact).
type opener func(rawURL string, u *url.URL, opts *Options) (publisher.Publisher, error)

// brokers holds the broker schemes; each broker's file registers its own
// in an init function with register.
var brokers = map[string]opener{}

func register(open opener, schemes ...string) {
	for _, s := range schemes {
		brokers[s] = open
		Supported = append(Supported, s)
	}
}

// planned are the contract's schemes; those without an adapter are refused
// with a clear error.
var planned = map[string]bool{"kafka": true, "amqp": true, "amqps": true, "nats": true, "redis": true, "rediss": true, "mqtt": true, "mqtts": true}

// registrable are the contract's schemes whose publishers are modules of
// their own, with the module that serves each: a program opens them only
// after it registers them (Register).
var registrable = map[string]string{
	"sqs":     "github.com/txoutbox/outbox/publisher/outboxsqs",
	"sns":     "github.com/txoutbox/outbox/publisher/outboxsns",
	"kinesis": "github.com/txoutbox/outbox/publisher/outboxkinesis",
	"pubsub":  "github.com/txoutbox/outbox/publisher/outboxpubsub",
}

// Scheme opens the destinations of a kind whose publisher is a module of
// its own (sqs://, sns://, kinesis://, pubsub://), so that this package
// does not bring its client into every program: a program that wants it
// imports that module and registers it, as the outbox command does.
type Scheme struct {
	// Names are the URL schemes it serves, lower case.
	Names []string
	// Open builds the publisher from the parsed URL, without the format
	// and ce_source parameters: ce is the CloudEvents format they asked
	// for, nil for the plain wire. Errors are one line without secrets.
	Open func(u *url.URL, ce *outboxce.Format, log *slog.Logger) (publisher.Publisher, error)
}

var (
	registeredMu sync.RWMutex
	registered   = map[string]Scheme{}
)

// Register makes Open serve s's schemes. It panics on a scheme this
// package serves itself, on an empty name or a nil Open: a program's
// wiring mistake. A later registration of a name replaces the earlier one.
func Register(s Scheme) {
	if s.Open == nil || len(s.Names) == 0 {
		panic("outboxurl: Register: a Scheme needs Names and Open")
	}
	registeredMu.Lock()
	defer registeredMu.Unlock()
	for _, n := range s.Names {
		n = strings.ToLower(n)
		if n == "" || n == "stdout" || n == "http" || n == "https" || brokers[n] != nil {
			panic(fmt.Sprintf("outboxurl: Register: scheme %q is served by this package", n))
		}
		if _, ok := registered[n]; !ok {
			Supported = append(Supported, n)
		}
		registered[n] = s
	}
}

func registeredScheme(name string) (Scheme, bool) {
	registeredMu.RLock()
	defer registeredMu.RUnlock()
	s, ok := registered[name]
	return s, ok
}

// Open returns the publisher for a destination URL. Errors are one line,
// name what is wrong and never contain credentials.
func Open(rawURL string, opts *Options) (publisher.Publisher, error) {
	if opts == nil {
		opts = &Options{}
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("destination %s: timeout must not be negative", Redact(rawURL))
	}
	if strings.TrimSpace(rawURL) == "" {
		return nil, fmt.Errorf("destination URL is empty: want one of %s (e.g. stdout:// or https://host/path)", list())
	}
	rawURL, ce, err := splitFormat(rawURL)
	if err != nil {
		return nil, err
	}
	if ce != nil {
		o := *opts
		o.ce = ce
		opts = &o
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("destination %q is not a valid URL", Redact(rawURL))
	}
	if sc, ok := registeredScheme(strings.ToLower(u.Scheme)); ok {
		return sc.Open(u, ce, opts.logger())
	}
	if s := strings.ToLower(u.Scheme); ce != nil && (s == "stdout" || s == "redis" || s == "rediss") {
		return nil, fmt.Errorf("destination %s: %s=%s: %s has no CloudEvents binding (supported on http, https, kafka, amqp, nats and mqtt)", Redact(rawURL), outboxce.ParamFormat, ce, s)
	}
	if ce.IsStructured() && !strings.HasPrefix(strings.ToLower(u.Scheme), "http") {
		return nil, fmt.Errorf("destination %s: %s=%s is for webhooks (http, https); brokers take %s=%s, binary mode", Redact(rawURL), outboxce.ParamFormat, ce, outboxce.ParamFormat, outboxce.FormatBinary)
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("destination %q has no scheme: want one of %s (e.g. stdout:// or https://host/path)", Redact(rawURL), list())
	}
	switch s := strings.ToLower(u.Scheme); {
	case s == "stdout":
		if u.Host != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return nil, fmt.Errorf("destination %s: stdout takes no host, path or options: write stdout://", Redact(rawURL))
		}
		w := opts.Stdout
		if w == nil {
			w = os.Stdout
		}
		return outboxstdout.New(w), nil
	case s == "http" || s == "https":
		if u.Host == "" || u.Hostname() == "" {
			return nil, fmt.Errorf("destination %s has no host", Redact(rawURL))
		}
		endpoint, check, err := takeParam(rawURL, "check_url")
		if err != nil {
			return nil, err
		}
		p, err := outboxwebhook.New(endpoint, &outboxwebhook.Config{Secret: opts.WebhookSecret, AllowShortSecret: opts.WebhookAllowShortSecret, MaxRetryAfter: opts.WebhookMaxRetryAfter, Timeout: opts.Timeout, CheckURL: check, CloudEvents: opts.cloudEvents()})
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		if c := p.Checker(); c != nil {
			return checkingWebhook{p, c}, nil
		}
		return p, nil
	case brokers[s] != nil:
		return brokers[s](rawURL, u, opts)
	case planned[s]:
		return nil, fmt.Errorf("destination %s: scheme %q is not supported yet (supported: %s)", Redact(rawURL), s, list())
	case registrable[s] != "":
		return nil, fmt.Errorf("destination %s: scheme %q is served by the module %s, which this program has not registered (outboxurl.Register); the outbox command has it", Redact(rawURL), s, registrable[s])
	default:
		return nil, fmt.Errorf("destination %s: unknown scheme %q (supported: %s)", Redact(rawURL), s, list())
	}
}

// checkingWebhook is a webhook publisher that is also the Checker of its
// check_url, so that the relay asks it before sending an uncertain message
// again.
type checkingWebhook struct {
	*outboxwebhook.Publisher
	publisher.Checker
}

// splitFormat returns rawURL without its format and ce_source
// parameters, and the format they ask for (nil for the plain wire).
func splitFormat(rawURL string) (string, *outboxce.Format, error) {
	rest, taken := cutParams(rawURL, func(n string) bool { return n == outboxce.ParamFormat || n == outboxce.ParamSource })
	var format, source string
	seen := map[string]bool{}
	for _, p := range taken {
		if seen[p[0]] {
			return "", nil, fmt.Errorf("destination %s: parameter %q given more than once", Redact(rawURL), p[0])
		}
		seen[p[0]] = true
		v, err := url.QueryUnescape(p[1])
		if err != nil {
			return "", nil, fmt.Errorf("destination %s: %s is not URL-encoded: %v", Redact(rawURL), p[0], err)
		}
		if p[0] == outboxce.ParamFormat {
			format = v
		} else {
			source = v
		}
	}
	f, err := outboxce.Parse(format, source)
	if err != nil {
		return "", nil, fmt.Errorf("destination %s: %v", Redact(rawURL), err)
	}
	return rest, f, nil
}

// WithCloudEvents returns rawURL with its format and ce_source parameters
// replaced: by format and source where they are not empty (a
// configuration file's route keys win over the URL's). The rest of the
// URL is kept byte for byte.
func WithCloudEvents(rawURL, format, source string) string {
	drop := func(n string) bool {
		return (n == outboxce.ParamFormat && format != "") || (n == outboxce.ParamSource && source != "")
	}
	rest, _ := cutParams(rawURL, drop)
	var add []string
	if format != "" {
		add = append(add, outboxce.ParamFormat+"="+url.QueryEscape(format))
	}
	if source != "" {
		add = append(add, outboxce.ParamSource+"="+url.QueryEscape(source))
	}
	if len(add) == 0 {
		return rest
	}
	base, fragment, hasFragment := strings.Cut(rest, "#")
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	base += sep + strings.Join(add, "&")
	if hasFragment {
		base += "#" + fragment
	}
	return base
}

// takeParam returns rawURL without its query parameter name, and the
// parameter's unescaped value ("" when absent); the rest of the URL is
// kept byte for byte.
func takeParam(rawURL, name string) (string, string, error) {
	rest, taken := cutParams(rawURL, func(n string) bool { return n == name })
	var value string
	for _, p := range taken {
		v, err := url.QueryUnescape(p[1])
		if err != nil {
			return "", "", fmt.Errorf("destination %s: %s is not URL-encoded: %v", Redact(rawURL), name, err)
		}
		value = v
	}
	return rest, value, nil
}

func list() string {
	return strings.Join(Supported, ", ")
}

// Redact returns rawURL with its userinfo (user:password@ keeps the user,
// a lone user@ is hidden whole) and the values of secret-looking query
// parameters (password, token, secret, key, auth, sig, …) replaced by
// "xxxxx", for logs and errors. It also works on strings that are not
// valid URLs.
func Redact(rawURL string) string {
	return outboxwebhook.Redact(rawURL)
}
