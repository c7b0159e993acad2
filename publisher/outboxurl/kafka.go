package outboxurl

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
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
//	sasl=MECHANISM             plain, scram-sha-256 or scram-sha-512; the
//	                           credentials are the URL's user and password
//	auto_create_topics=true    let brokers create missing topics (off: a
//	                           missing topic is a permanent error)
const (
	KafkaParamClientID         = "client_id"
	KafkaParamSASL             = "sasl"
	KafkaParamAutoCreateTopics = "auto_create_topics"
)

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
	known := append([]string{KafkaParamClientID, KafkaParamSASL, KafkaParamAutoCreateTopics}, TLSParams...)
	var unknown []string
	for k := range q {
		if !slices.Contains(known, k) {
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
	mech, err := kafkaSASL(u, q.Get(KafkaParamSASL))
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

// kafkaSASL returns the SASL mechanism the URL asks for, nil for none.
// Credentials come from the userinfo and appear in no error.
func kafkaSASL(u *url.URL, name string) (sasl.Mechanism, error) {
	if name == "" {
		if u.User != nil {
			return nil, fmt.Errorf("credentials in the URL need %s=plain, scram-sha-256 or scram-sha-512", KafkaParamSASL)
		}
		return nil, nil
	}
	if u.User == nil {
		return nil, fmt.Errorf("%s=%s needs user:password@ in the URL", KafkaParamSASL, name)
	}
	user := u.User.Username()
	pass, ok := u.User.Password()
	if user == "" || !ok {
		return nil, fmt.Errorf("%s=%s needs user:password@ in the URL", KafkaParamSASL, name)
	}
	switch strings.ToLower(name) {
	case "plain":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "scram-sha-256":
		return scram.Sha256(func(context.Context) (scram.Auth, error) { return scram.Auth{User: user, Pass: pass}, nil }), nil
	case "scram-sha-512":
		return scram.Sha512(func(context.Context) (scram.Auth, error) { return scram.Auth{User: user, Pass: pass}, nil }), nil
	}
	return nil, fmt.Errorf("%s=%q: want plain, scram-sha-256 or scram-sha-512", KafkaParamSASL, name)
}
