package outboxurl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxkafka"
)

// Kafka URL parameters, besides the TLS ones (see TLSParams):
//
//	kafka://[user:password@]host:9092[,host2:9092…][?params]
//
//	client_id=NAME             client id sent to the brokers (default outbox-relay)
//	sasl=MECHANISM             plain, scram-sha-256 or scram-sha-512 (the
//	                           credentials are the URL's user and password),
//	                           oauthbearer (a token, see below), or a
//	                           mechanism a program registered with
//	                           RegisterKafkaSASL, such as aws-msk-iam
//	auto_create_topics=true    let brokers create missing topics (off: a
//	                           missing topic is a permanent error)
//
// With sasl=oauthbearer:
//
//	token_file=PATH            read the token from this file at every
//	                           authentication (a sidecar keeps it fresh);
//	                           without it the token is the environment
//	                           variable OUTBOX_KAFKA_OAUTH_TOKEN
//	oauth_ext_NAME=VALUE       SASL extension NAME=VALUE sent with the token
//	                           (Confluent Cloud: oauth_ext_logicalCluster,
//	                           oauth_ext_identityPoolId)
const (
	KafkaParamClientID         = "client_id"
	KafkaParamSASL             = "sasl"
	KafkaParamAutoCreateTopics = "auto_create_topics"
	KafkaParamTokenFile        = "token_file"
	KafkaParamOAuthExtPrefix   = "oauth_ext_"
)

// KafkaOAuthTokenEnv is the environment variable that holds the token of
// a kafka:// URL with sasl=oauthbearer and no token_file. It is read once,
// when the URL is opened.
const KafkaOAuthTokenEnv = "OUTBOX_KAFKA_OAUTH_TOKEN"

// maxTokenBytes bounds what is read from a token_file.
const maxTokenBytes = 64 << 10

func init() { register(openKafka, "kafka") }

// openKafka builds a Kafka publisher (outboxkafka.Dial) from its URL. A
// positive opts.Timeout (the relay's publish timeout) lowers the client's
// record delivery timeout to two thirds of it.
func openKafka(rawURL string, u *url.URL, opts *Options) (publisher.Publisher, error) {
	shown := Redact(rawURL)
	if strings.ContainsFunc(shown, unicode.IsControl) {
		shown = strconv.Quote(shown) // errors stay on one line
	}
	bad := func(format string, args ...any) (publisher.Publisher, error) {
		return nil, fmt.Errorf("destination %s: "+format, append([]any{shown}, args...)...)
	}
	if u.Opaque != "" || u.Host == "" {
		return bad("no broker address: want kafka://host:9092[,host2:9092]")
	}
	if u.Path != "" && u.Path != "/" {
		return bad("kafka takes no path (topics come from the messages or the route's destination)")
	}
	if u.Fragment != "" {
		return bad("kafka takes no #fragment")
	}
	var seeds []string
	for _, s := range strings.Split(u.Host, ",") {
		if s == "" || strings.HasPrefix(s, ":") {
			return bad("empty broker address in the host list")
		}
		seeds = append(seeds, s)
	}
	q := u.Query()
	saslName := strings.ToLower(q.Get(KafkaParamSASL))
	saslParams, err := kafkaSASLParams(saslName)
	if err != nil {
		return bad("%v", err)
	}
	known := append(append([]string{KafkaParamClientID, KafkaParamSASL, KafkaParamAutoCreateTopics}, saslParams...), TLSParams...)
	var unknown []string
	for k := range q {
		if !slices.Contains(known, k) && !(saslName == saslOAuthBearer && strings.HasPrefix(k, KafkaParamOAuthExtPrefix)) {
			unknown = append(unknown, strconv.Quote(k))
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return bad("unknown parameter %s (known: %s)", strings.Join(unknown, ", "), strings.Join(known, ", "))
	}
	for k, vs := range q {
		if len(vs) > 1 {
			return bad("parameter %q given %d times", k, len(vs))
		}
	}

	kopts := []kgo.Opt{}
	if opts != nil && opts.Timeout > 0 {
		// Options.Timeout is the relay's publish timeout: give up on a
		// record that cannot be written before it, so that the relay
		// hears the cause rather than a bare deadline.
		if d := opts.Timeout * 2 / 3; d < outboxkafka.DefaultRecordDeliveryTimeout {
			kopts = append(kopts, kgo.RecordDeliveryTimeout(max(d, time.Second)))
		}
	}
	if q.Has(KafkaParamClientID) {
		id := q.Get(KafkaParamClientID)
		if id == "" {
			return bad("%s is empty", KafkaParamClientID)
		}
		kopts = append(kopts, kgo.ClientID(id))
	}
	cfg := &outboxkafka.Config{CloudEvents: opts.cloudEvents()}
	if v := q.Get(KafkaParamAutoCreateTopics); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return bad("%s=%q: want true or false", KafkaParamAutoCreateTopics, v)
		}
		cfg.AutoCreateTopics = b
	}
	mech, err := kafkaSASL(u, saslName, opts)
	if err != nil {
		return bad("%v", err)
	}
	if mech != nil {
		kopts = append(kopts, kgo.SASL(mech))
	}
	tc, err := TLSConfig(u, false, opts)
	if err != nil {
		return bad("%v", err)
	}
	if tc != nil {
		if (opts == nil || opts.TLS == nil) && q.Get(ParamServerName) == "" {
			tc.ServerName = "" // the client verifies each broker against its own host name
		}
		kopts = append(kopts, kgo.DialTLSConfig(tc))
	}
	p, err := outboxkafka.Dial(seeds, cfg, kopts...)
	if err != nil {
		return bad("%v", err)
	}
	return p, nil
}

// The sasl= values this package serves itself.
const (
	saslPlain       = "plain"
	saslScram256    = "scram-sha-256"
	saslScram512    = "scram-sha-512"
	saslOAuthBearer = "oauthbearer"
)

// kafkaSASLParams returns the URL parameters the sasl= value name reads
// besides kafka's own, or an error for a value no one serves. name is
// lower case; "" is no SASL.
func kafkaSASLParams(name string) ([]string, error) {
	switch name {
	case "", saslPlain, saslScram256, saslScram512:
		return nil, nil
	case saslOAuthBearer:
		return []string{KafkaParamTokenFile}, nil
	}
	if m, ok := registeredKafkaSASL(name); ok {
		return m.Params, nil
	}
	if by := kafkaSASLServedBy[name]; by != "" {
		return nil, fmt.Errorf("%s=%s needs %s, which this program has not registered (outboxurl.RegisterKafkaSASL; the outbox command does)", KafkaParamSASL, name, by)
	}
	return nil, fmt.Errorf("%s=%q: want %s", KafkaParamSASL, name, kafkaSASLNames())
}

// kafkaSASLNames lists the sasl= values, for errors.
func kafkaSASLNames() string {
	names := []string{saslPlain, saslScram256, saslScram512, saslOAuthBearer}
	kafkaSASLMu.RLock()
	for n := range kafkaSASLs {
		names = append(names, n)
	}
	kafkaSASLMu.RUnlock()
	for n := range kafkaSASLServedBy {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names[4:])
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// kafkaSASL returns the SASL mechanism the URL asks for, nil for none;
// name is lower case. Credentials come from the userinfo, a token file,
// the environment or a registered mechanism, and appear in no error.
func kafkaSASL(u *url.URL, name string, opts *Options) (sasl.Mechanism, error) {
	switch name {
	case "":
		if u.User != nil {
			return nil, fmt.Errorf("credentials in the URL need %s=%s, %s or %s", KafkaParamSASL, saslPlain, saslScram256, saslScram512)
		}
		return nil, nil
	case saslPlain, saslScram256, saslScram512:
	default:
		// The other mechanisms get their credentials elsewhere.
		if u.User != nil {
			return nil, fmt.Errorf("%s=%s takes no user:password@ in the URL (its credentials come from elsewhere; see the Kafka page of the docs)", KafkaParamSASL, name)
		}
		if name == saslOAuthBearer {
			return kafkaOAuth(u.Query(), opts)
		}
		m, _ := registeredKafkaSASL(name) // kafkaSASLParams checked it is there
		mech, err := m.Mechanism(u)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %v", KafkaParamSASL, name, err)
		}
		if mech == nil {
			return nil, fmt.Errorf("%s=%s: the registered mechanism returned none", KafkaParamSASL, name)
		}
		return mech, nil
	}
	if u.User == nil {
		return nil, fmt.Errorf("%s=%s needs user:password@ in the URL", KafkaParamSASL, name)
	}
	user := u.User.Username()
	pass, ok := u.User.Password()
	if user == "" || !ok {
		return nil, fmt.Errorf("%s=%s needs user:password@ in the URL", KafkaParamSASL, name)
	}
	switch name {
	case saslPlain:
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case saslScram256:
		return scram.Sha256(func(context.Context) (scram.Auth, error) { return scram.Auth{User: user, Pass: pass}, nil }), nil
	default:
		return scram.Sha512(func(context.Context) (scram.Auth, error) { return scram.Auth{User: user, Pass: pass}, nil }), nil
	}
}

// kafkaOAuth builds the OAUTHBEARER mechanism of a URL: the token comes
// from token_file, read again at every authentication, or else from
// KafkaOAuthTokenEnv, read now; oauth_ext_NAME parameters are the SASL
// extensions. No error holds the token.
func kafkaOAuth(q url.Values, opts *Options) (sasl.Mechanism, error) {
	var ext map[string]string
	for k, vs := range q {
		name, ok := strings.CutPrefix(k, KafkaParamOAuthExtPrefix)
		if !ok {
			continue
		}
		// RFC 7628 3.1: key = 1*(ALPHA), value = *(VCHAR / SP / HTAB / CR / LF).
		if name == "" || strings.ContainsFunc(name, func(r rune) bool { return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') }) {
			return nil, fmt.Errorf("%s: an extension name is letters only (RFC 7628)", strconv.Quote(k))
		}
		if name == "auth" {
			return nil, fmt.Errorf("%s: \"auth\" is the token itself, not an extension", strconv.Quote(k))
		}
		if strings.ContainsFunc(vs[0], func(r rune) bool { return r < 0x20 || r > 0x7e }) {
			return nil, fmt.Errorf("%s: the value must be printable ASCII (RFC 7628)", strconv.Quote(k))
		}
		if ext == nil {
			ext = map[string]string{}
		}
		ext[name] = vs[0]
	}
	var token func() (string, error)
	if q.Has(KafkaParamTokenFile) {
		path := q.Get(KafkaParamTokenFile)
		if path == "" {
			return nil, fmt.Errorf("%s is empty", KafkaParamTokenFile)
		}
		token = func() (string, error) { return readTokenFile(path) }
		if _, err := token(); err != nil {
			// Not an error yet: the sidecar that writes the file may
			// not have written it, and authentication reads it again.
			opts.logger().Warn("kafka: the OAUTHBEARER token file cannot be used yet; the route is unavailable until it can", "err", err.Error())
		}
	} else {
		t := strings.TrimSpace(os.Getenv(KafkaOAuthTokenEnv))
		if t == "" {
			return nil, fmt.Errorf("%s=%s needs a token: add %s=PATH or set %s", KafkaParamSASL, saslOAuthBearer, KafkaParamTokenFile, KafkaOAuthTokenEnv)
		}
		if err := checkToken(t); err != nil {
			return nil, fmt.Errorf("%s: %v", KafkaOAuthTokenEnv, err)
		}
		token = func() (string, error) { return t, nil }
	}
	return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
		t, err := token()
		if err != nil {
			return oauth.Auth{}, err
		}
		return oauth.Auth{Token: t, Extensions: ext}, nil
	}), nil
}

// readTokenFile returns the token in the file at path, without the
// whitespace around it. Its errors wrap outboxkafka.ErrNoCredentials and
// never hold the file's contents.
func readTokenFile(path string) (string, error) {
	fail := func(format string, args ...any) (string, error) {
		return "", fmt.Errorf("%w: %s %s: "+format, append([]any{outboxkafka.ErrNoCredentials, KafkaParamTokenFile, path}, args...)...)
	}
	f, err := os.Open(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in the message already
		}
		return fail("%v", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenBytes+1))
	if err != nil {
		return fail("%v", err)
	}
	if len(b) > maxTokenBytes {
		return fail("larger than %d bytes", maxTokenBytes)
	}
	t := strings.TrimSpace(string(b))
	if err := checkToken(t); err != nil {
		return fail("%v", err)
	}
	return t, nil
}

// checkToken says what is wrong with a bearer token, without quoting it.
func checkToken(t string) error {
	switch {
	case t == "":
		return errors.New("empty")
	case strings.ContainsFunc(t, func(r rune) bool { return r <= ' ' || r > 0x7e }):
		return errors.New("the token has blanks, control or non-ASCII characters in it (one token, nothing else)")
	}
	return nil
}

// KafkaSASL is a SASL mechanism for kafka:// URLs whose library this
// package does not import, so that programs that do not use it do not
// carry it: a program registers it with RegisterKafkaSASL, as the outbox
// command does with aws-msk-iam (Amazon MSK IAM, over aws-sdk-go-v2).
type KafkaSASL struct {
	// Name is the value of the URL's sasl= parameter it serves, matched
	// without regard to case.
	Name string
	// Params are the URL parameters it reads, besides kafka's own and the
	// TLS ones; a URL with sasl=Name may carry them, others refuse them.
	// Defaults to none.
	Params []string
	// Mechanism builds the mechanism from the parsed URL, once for each
	// Open; the client calls its Authenticate on every connection, which
	// is where credentials should be fetched so that they can be
	// refreshed. A URL with user:password@ never reaches it. An error from
	// Authenticate that wraps outboxkafka.ErrNoCredentials takes the route
	// down rather than charging the message. Its own errors are one line
	// without secrets; Open prefixes them with the redacted URL.
	Mechanism func(u *url.URL) (sasl.Mechanism, error)
}

// kafkaSASLServedBy says what serves the sasl= values that this package
// knows of but leaves to a registration.
var kafkaSASLServedBy = map[string]string{
	"aws-msk-iam": "the AWS SDK's credential chain (aws-sdk-go-v2)",
}

var (
	kafkaSASLMu sync.RWMutex
	kafkaSASLs  = map[string]KafkaSASL{}
)

// RegisterKafkaSASL makes kafka:// URLs with sasl=m.Name use m. It panics
// on an empty Name, a nil Mechanism, a name this package serves itself or
// a parameter kafka URLs already have: a program's wiring mistake. A later
// registration of a name replaces the earlier one.
func RegisterKafkaSASL(m KafkaSASL) {
	name := strings.ToLower(m.Name)
	if name == "" || m.Mechanism == nil {
		panic("outboxurl: RegisterKafkaSASL: a KafkaSASL needs a Name and a Mechanism")
	}
	if name == saslPlain || name == saslScram256 || name == saslScram512 || name == saslOAuthBearer {
		panic(fmt.Sprintf("outboxurl: RegisterKafkaSASL: sasl=%s is served by this package", name))
	}
	for _, p := range m.Params {
		if p == KafkaParamClientID || p == KafkaParamSASL || p == KafkaParamAutoCreateTopics || p == KafkaParamTokenFile || strings.HasPrefix(p, KafkaParamOAuthExtPrefix) || slices.Contains(TLSParams, p) || p == "" {
			panic(fmt.Sprintf("outboxurl: RegisterKafkaSASL: parameter %q is kafka's own", p))
		}
	}
	m.Name = name
	m.Params = slices.Clone(m.Params)
	kafkaSASLMu.Lock()
	defer kafkaSASLMu.Unlock()
	kafkaSASLs[name] = m
}

func registeredKafkaSASL(name string) (KafkaSASL, bool) {
	kafkaSASLMu.RLock()
	defer kafkaSASLMu.RUnlock()
	m, ok := kafkaSASLs[name]
	return m, ok
}
