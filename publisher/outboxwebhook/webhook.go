// Package outboxwebhook is the http:// and https:// destination: it POSTs
// every message to one endpoint, signed per the Standard Webhooks scheme.
//
// The request body is the payload, byte for byte. The message's headers
// travel as HTTP headers (outbox-topic, outbox-business-key, content-type,
// traceparent and the producer's own) except credentials, hop-by-hop and
// proxy headers, which are never taken from message data (see
// FromMessage), plus:
//
//	webhook-id: <message id>            the same on every attempt
//	webhook-timestamp: <unix seconds>   fresh on every attempt
//	webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">
//
// The signature is sent only when Config.Secret is set; New refuses a
// secret whose key is shorter than MinSecretBytes (16 bytes) unless
// Config.AllowShortSecret says otherwise. Receivers check it
// with package webhooksig (or take inbox.WebhookHandler, which does) and
// dedupe on webhook-id.
//
// With Config.CloudEvents (format=cloudevents in the URL) the request is a
// CloudEvent of the CloudEvents HTTP binding instead: in binary mode the
// body is the payload and the attributes are ce- headers (ce-id, ce-type,
// ce-source, ce-time, ce-subject, percent-encoded) with Content-Type; in
// structured mode (format=cloudevents-structured) the body is the event in
// the JSON event format, Content-Type application/cloudevents+json. The
// outbox-* headers are left out; the webhook-* headers and the signature,
// over the body as sent, stay. See package outboxce.
//
// # Results
//
// A 2xx response means delivered. 408, 429 and 5xx are retried, no sooner
// than the response's Retry-After, delay-seconds or an HTTP date (capped
// at Config.MaxRetryAfter, 1 h by default); the relay holds the whole
// route for that wait and then sends one request before the others. Every other
// status, redirects included, is permanent: redirects are never followed,
// since a moved endpoint is a configuration error, not something to chase
// with signed payloads. A connection that cannot be made (refused, no such
// host, unreachable) marks the destination unavailable; a failure after the
// request went out (timeout, reset) is an unknown outcome, because the
// receiver may have processed it.
package outboxwebhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/txoutbox/outbox/internal/redact"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
	"github.com/txoutbox/outbox/webhooksig"
)

// Config defaults and limits.
const (
	// DefaultTimeout bounds one request, connection included.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxConcurrency is how many requests of one batch are in
	// flight at once.
	DefaultMaxConcurrency = 32
	// MaxRetryAfter is the default of Config.MaxRetryAfter, the cap on
	// the wait a Retry-After header can ask for.
	MaxRetryAfter = time.Hour
	// SecretPrefix marks a Standard Webhooks secret: the rest is base64 and
	// its decoded bytes are the HMAC key (webhooksig.SecretPrefix).
	SecretPrefix = webhooksig.SecretPrefix
	// UserAgent is sent unless Config.Headers names another.
	UserAgent = "outbox-relay"
	// MinSecretBytes is the shortest HMAC key New accepts without
	// Config.AllowShortSecret: 128 bits, counted after the base64 decoding
	// of a "whsec_" secret (the Standard Webhooks form carries 24 to 64).
	MinSecretBytes = 16
)

// ErrShortSecret is returned by New for a Config.Secret whose key is
// shorter than MinSecretBytes, without Config.AllowShortSecret. Its
// message never contains the secret.
var ErrShortSecret = errors.New("the secret is shorter than 16 bytes")

// Header names of the Standard Webhooks scheme (webhooksig's).
const (
	HeaderID        = webhooksig.HeaderID
	HeaderTimestamp = webhooksig.HeaderTimestamp
	HeaderSignature = webhooksig.HeaderSignature
)

// maxErrorBody is how much of a failed response's body an error quotes.
const maxErrorBody = 200

// maxDrain is how much of a response body is read so that the connection
// can be reused.
const maxDrain = 64 << 10

// Config configures a Publisher. The zero value (or nil) is valid.
type Config struct {
	// Secret signs every request. A value starting with "whsec_" is a
	// Standard Webhooks secret: the rest is base64 and the decoded bytes
	// are the HMAC key; any other value is used as raw bytes. A key
	// shorter than MinSecretBytes is refused (ErrShortSecret) unless
	// AllowShortSecret is set. Defaults to "", no signature.
	Secret string
	// AllowShortSecret accepts a Secret whose key is shorter than
	// MinSecretBytes, for a receiver whose secret cannot change yet: such
	// a key can be guessed far more easily. Defaults to false.
	AllowShortSecret bool
	// Client sends the requests. It is copied and the copy never follows
	// redirects. Defaults to a client with its own connection pool.
	Client *http.Client
	// Timeout bounds each request, from connecting to reading the response
	// headers. Defaults to DefaultTimeout (10 s).
	Timeout time.Duration
	// MaxConcurrency is how many requests of one batch are in flight at
	// once. Defaults to DefaultMaxConcurrency (32).
	MaxConcurrency int
	// MaxRetryAfter caps the wait a response's Retry-After can ask for,
	// so that a hostile or mistaken value cannot park the route for a
	// year (the relay caps it again with outbox.Route.MaxRetryAfter).
	// Defaults to MaxRetryAfter (1 h).
	MaxRetryAfter time.Duration
	// Headers are added to every request; they win over the message's own
	// headers but not over the webhook-* headers. Defaults to none.
	Headers map[string]string
	// CheckURL, when set, is where the receiver says whether it already
	// processed a message: an http or https URL containing {id}, replaced
	// by the message id (e.g. https://inventory/hooks/processed/{id}).
	// Publisher.Checker then asks it before a message whose last attempt
	// ended unknown is sent again (see Checker). Defaults to "", no check.
	CheckURL string
	// CloudEvents, when set, sends every message as a CloudEvent: binary
	// mode (ce- headers, the payload as the body) or structured mode
	// (the whole event as an application/cloudevents+json body), see
	// package outboxce. The Standard Webhooks headers and signature are
	// sent all the same, over the body as sent. Defaults to nil, the
	// plain wire.
	CloudEvents *outboxce.Format
}

// Publisher POSTs messages to one webhook endpoint. It is safe for
// concurrent use.
type Publisher struct {
	endpoint    *url.URL
	redacted    string
	key         []byte
	client      *http.Client
	timeout     time.Duration
	concurrency int
	maxWait     time.Duration // Config.MaxRetryAfter
	headers     http.Header
	ownClient   bool   // Close may close its idle connections
	check       string // CheckURL; "" when none
	ce          *outboxce.Format
	closed      atomic.Bool
	now         func() time.Time
}

var _ publisher.Publisher = (*Publisher)(nil)

// New returns a Publisher that POSTs to endpoint, an absolute http or https
// URL. A userinfo in the URL is sent as basic authentication. Errors name
// the bad field and never contain the secret or URL credentials.
func New(endpoint string, cfg *Config) (*Publisher, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("outboxwebhook: endpoint %s is not a URL", Redact(endpoint))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("outboxwebhook: endpoint %s: scheme must be http or https", Redact(endpoint))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("outboxwebhook: endpoint %s has no host", Redact(endpoint))
	}
	if cfg.Timeout < 0 {
		return nil, errors.New("outboxwebhook: Timeout must not be negative")
	}
	if cfg.MaxConcurrency < 0 {
		return nil, errors.New("outboxwebhook: MaxConcurrency must not be negative")
	}
	if cfg.MaxRetryAfter < 0 {
		return nil, errors.New("outboxwebhook: MaxRetryAfter must not be negative")
	}
	var key []byte // nil: requests go unsigned
	if cfg.Secret != "" {
		k, err := webhooksig.ParseSecret(cfg.Secret)
		if err != nil {
			return nil, fmt.Errorf("outboxwebhook: Secret: %w", err)
		}
		if len(k) < MinSecretBytes && !cfg.AllowShortSecret {
			return nil, fmt.Errorf("outboxwebhook: Secret: %w (after whsec_ decoding); use a longer one or set AllowShortSecret", ErrShortSecret)
		}
		key = k
	}
	p := &Publisher{
		endpoint:    u,
		redacted:    Redact(endpoint),
		key:         key,
		timeout:     orDefault(cfg.Timeout, DefaultTimeout),
		concurrency: orDefault(cfg.MaxConcurrency, DefaultMaxConcurrency),
		maxWait:     orDefault(cfg.MaxRetryAfter, MaxRetryAfter),
		headers:     http.Header{},
		now:         time.Now,
	}
	p.headers.Set("User-Agent", UserAgent)
	for k, v := range cfg.Headers {
		if !validHeaderName(k) || !validHeaderValue(v) {
			return nil, fmt.Errorf("outboxwebhook: Headers: invalid header %q", k)
		}
		p.headers.Set(k, v)
	}
	if cfg.Client != nil {
		c := *cfg.Client
		p.client = &c
	} else {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = p.concurrency
		p.client = &http.Client{Transport: t, Timeout: p.timeout}
		p.ownClient = true
	}
	p.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if err := cfg.CloudEvents.Validate(); err != nil {
		return nil, fmt.Errorf("outboxwebhook: CloudEvents: %v", err)
	}
	if cfg.CloudEvents != nil {
		f := *cfg.CloudEvents
		p.ce = &f
	}
	if cfg.CheckURL != "" {
		if err := validCheckURL(cfg.CheckURL); err != nil {
			return nil, err
		}
		p.check = cfg.CheckURL
	}
	return p, nil
}

func orDefault[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// Publish POSTs every envelope of the batch, at most MaxConcurrency at a
// time, and returns the results in batch order.
func (p *Publisher) Publish(ctx context.Context, batch []*publisher.Envelope) []error {
	errs := make([]error, len(batch))
	if p.closed.Load() {
		for i := range errs {
			errs[i] = errors.New("outboxwebhook: publisher is closed")
		}
		return errs
	}
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= len(batch) {
				return
			}
			if err := ctx.Err(); err != nil {
				errs[i] = fmt.Errorf("POST %s: not sent: %w", p.redacted, err)
				continue
			}
			errs[i] = p.send(ctx, batch[i])
		}
	}
	// The caller's goroutine is one of the workers: a call of one
	// message starts none.
	var wg sync.WaitGroup
	for range min(p.concurrency, len(batch)) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	return errs
}

// Close makes later Publish calls fail and closes idle connections,
// unless the client was the caller's (Config.Client), whose pool may serve
// others.
func (p *Publisher) Close() error {
	p.closed.Store(true)
	if p.ownClient {
		p.client.CloseIdleConnections()
	}
	return nil
}

// send delivers one envelope and classifies the result.
func (p *Publisher) send(ctx context.Context, env *publisher.Envelope) error {
	if env == nil {
		return publisher.Permanent(errors.New("outboxwebhook: nil envelope"))
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteHeaderField: func(string, []string) { wrote.Store(true) },
	})
	body, headers, err := p.wire(env)
	if err != nil {
		return publisher.Permanent(fmt.Errorf("POST %s: %v", p.redacted, err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.endpoint.String(), bytes.NewReader(body))
	if err != nil {
		return publisher.Permanent(fmt.Errorf("POST %s: %v", p.redacted, err))
	}
	for k, v := range headers {
		if !validHeaderName(k) || !validHeaderValue(v) {
			return publisher.Permanent(fmt.Errorf("POST %s: message header %q cannot be sent over HTTP", p.redacted, k))
		}
		if !FromMessage(k) {
			continue
		}
		req.Header.Set(k, v)
	}
	for k, v := range p.headers {
		req.Header[k] = v
	}
	ts := strconv.FormatInt(p.now().Unix(), 10)
	req.Header.Set(HeaderID, env.ID)
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Del(HeaderSignature)
	if p.key != nil {
		req.Header.Set(HeaderSignature, webhooksig.Sign(p.key, env.ID, ts, body))
	}

	resp, err := p.client.Do(req)
	if err != nil {
		return p.transportError(err, wrote.Load())
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
		return nil
	}
	got, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+utf8.UTFMax))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	herr := &HTTPError{StatusCode: resp.StatusCode, Status: resp.Status, URL: p.redacted, Body: snippet(got)}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		if loc := resp.Header.Get("Location"); loc != "" {
			herr.Location = Redact(snippet([]byte(loc)))
		}
	}
	if !Retryable(resp.StatusCode) {
		return publisher.Permanent(herr)
	}
	if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), p.now(), p.maxWait); ok {
		herr.RetryAfter = d
		return publisher.RetryAfter(herr, d)
	}
	return herr
}

// wire returns the request body and the message's headers in the route's
// format.
func (p *Publisher) wire(env *publisher.Envelope) ([]byte, map[string]string, error) {
	switch {
	case p.ce == nil:
		return env.Payload, env.Headers, nil
	case p.ce.IsStructured():
		return p.ce.Structured(env), p.ce.StructuredHeaders(env), nil
	}
	h, err := p.ce.Headers(outboxce.HTTP, env)
	return env.Payload, h, err
}

// transportError classifies a failed round trip: nothing sent means the
// destination could not be reached; something sent means the outcome is
// unknown.
func (p *Publisher) transportError(err error, wrote bool) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its message repeats the URL, unredacted query included
	}
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		err = &timeoutError{after: p.timeout, err: err}
	}
	e := fmt.Errorf("POST %s: %w", p.redacted, err)
	if !wrote {
		if errors.Is(err, context.Canceled) {
			return e // the relay is stopping; nothing went out
		}
		return publisher.Unavailable(e)
	}
	return publisher.Unknown(e)
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// timeoutError replaces the opaque "context deadline exceeded".
type timeoutError struct {
	after time.Duration
	err   error
}

func (e *timeoutError) Error() string {
	return "no response within " + e.after.String() + " (" + e.err.Error() + ")"
}
func (e *timeoutError) Unwrap() error { return e.err }
func (e *timeoutError) Timeout() bool { return true }

// HTTPError is a response with a status other than 2xx. Publish returns it
// wrapped in the class the status calls for; errors.As finds it.
type HTTPError struct {
	// StatusCode is the response status, e.g. 404.
	StatusCode int
	// Status is the status line, e.g. "404 Not Found".
	Status string
	// URL is the endpoint with its credentials redacted.
	URL string
	// Body is the start of the response body, on one line.
	Body string
	// Location is a redirect's target, redacted; redirects are not
	// followed.
	Location string
	// RetryAfter is the response's Retry-After, capped at
	// Config.MaxRetryAfter;
	// 0 when there was none.
	RetryAfter time.Duration
}

func (e *HTTPError) Error() string {
	status := e.Status
	if status == "" {
		status = strconv.Itoa(e.StatusCode) + " " + http.StatusText(e.StatusCode)
	}
	s := "HTTP " + strings.TrimSpace(status) + " from " + e.URL
	if e.RetryAfter > 0 {
		s += " (retry after " + e.RetryAfter.String() + ")"
	}
	if e.Location != "" {
		s += " (redirect to " + e.Location + " not followed)"
	}
	if e.Body != "" {
		s += ": " + e.Body
	}
	return s
}

// Retryable reports whether a response status is worth retrying: 408, 429
// and 5xx.
func Retryable(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || (status >= 500 && status <= 599)
}

// parseRetryAfter reads a Retry-After value, delay-seconds or an HTTP
// date, capped at limit.
func parseRetryAfter(v string, now time.Time, limit time.Duration) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		if n > int64(limit/time.Second) {
			return limit, true
		}
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = max(t.Sub(now), 0)
	} else {
		return 0, false
	}
	return min(d, limit), true
}

// snippet renders the start of a body as one printable line.
func snippet(b []byte) string {
	if len(b) > maxErrorBody {
		b = b[:maxErrorBody]
		for len(b) > 0 && !utf8.Valid(b) {
			b = b[:len(b)-1] // don't split a rune
		}
		b = append(b, "…"...)
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// notFromMessage are the HTTP headers a message's headers never set:
// credentials (a message built from an inbound request must not hand its
// caller's credentials to the receiver, nor replace the endpoint's own
// basic authentication), hop-by-hop headers, and those describing the
// connection or the client, which belong to the transport.
var notFromMessage = map[string]bool{
	"Authorization":       true,
	"Proxy-Authorization": true,
	"Proxy-Authenticate":  true,
	"Cookie":              true,
	"Set-Cookie":          true,
	"Connection":          true,
	"Proxy-Connection":    true,
	"Keep-Alive":          true,
	"Te":                  true,
	"Trailer":             true,
	"Transfer-Encoding":   true,
	"Upgrade":             true,
	"Expect":              true,
	"Host":                true,
	"Forwarded":           true,
	"Content-Length":      true,
	"Via":                 true,
	"X-Real-Ip":           true,
}

// FromMessage reports whether a message header named name becomes an HTTP
// header of the request. It does not for credentials (Authorization,
// Proxy-Authorization, Cookie, Set-Cookie), hop-by-hop headers
// (Connection, Keep-Alive, TE, Trailer, Transfer-Encoding, Upgrade),
// Host, Content-Length, Expect, Via, Forwarded, X-Real-IP and X-Forwarded-*:
// those are dropped from the request, the rest of the message still goes.
// Config.Headers, the signature headers and User-Agent are the route's
// own and win over a message header of the same name.
func FromMessage(name string) bool {
	c := http.CanonicalHeaderKey(name)
	return !notFromMessage[c] && !strings.HasPrefix(c, "X-Forwarded-")
}

// validHeaderName reports whether n is an HTTP token.
func validHeaderName(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// validHeaderValue reports whether v can be an HTTP header value: no
// control characters but tab.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// Redact returns rawURL with its userinfo and secret-looking query values
// replaced by "xxxxx", fit for logs and errors. It works on strings that
// do not parse as URLs too. It is outboxurl.Redact.
func Redact(rawURL string) string { return redact.URL(rawURL) }
