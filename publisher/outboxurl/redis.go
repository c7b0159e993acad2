package outboxurl

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxredis"
)

func init() { register(openRedis, "redis", "rediss") }

// Redis URL parameters (see outboxredis and docs/brokers/redis.md):
//
//	maxlen=N             trim each stream to about N entries (XADD MAXLEN ~ N)
//	create=true          let XADD create a missing stream (default: missing is an error)
//	wait=N               confirm only once N replicas acknowledged (WAIT)
//	wait_timeout=DUR     bound on WAIT (default 1s)
const (
	ParamRedisMaxLen      = "maxlen"
	ParamRedisCreate      = "create"
	ParamRedisWait        = "wait"
	ParamRedisWaitTimeout = "wait_timeout"
)

// Timeouts of the client a redis:// URL opens. The relay's publish
// deadline bounds every round trip too.
const (
	redisDialTimeout = 5 * time.Second
	redisIOTimeout   = 10 * time.Second
)

// openRedis opens redis://[user:pass@]host[:port][/db][?params] and
// rediss://… (TLS).
func openRedis(rawURL string, u *url.URL, opts *Options) (publisher.Publisher, error) {
	bad := func(err error) error {
		return fmt.Errorf("destination %s: %v", redactRedis(rawURL, u), err)
	}
	addr, db, err := redisServer(rawURL, u)
	if err != nil {
		return nil, bad(err)
	}
	cfg, err := redisConfig(u.Query())
	if err != nil {
		return nil, bad(err)
	}
	tlsCfg, err := TLSConfig(u, strings.EqualFold(u.Scheme, "rediss"), opts)
	if err != nil {
		return nil, bad(err)
	}
	client := redis.NewClient(redisOptions(u, addr, db, tlsCfg, cfg))
	p, err := outboxredis.New(client, cfg)
	if err != nil {
		_ = client.Close()
		return nil, bad(err)
	}
	return p, nil
}

// redisServer reads the server's address (port 6379 when the URL gives
// none) and the database number (the path; 0 when there is none) of a
// redis:// URL, refusing what the URL cannot mean.
func redisServer(rawURL string, u *url.URL) (addr string, db int, err error) {
	if _, rest, _ := strings.Cut(rawURL, "://"); u.User == nil && strings.Contains(rest, "@") {
		// The parser did not take it for userinfo: a password with '#',
		// '?' or '/' in it, unescaped. Quote none of it.
		return "", 0, errors.New("cannot tell the password from the rest: percent-encode '#', '?' and '/' in it (%23, %3F, %2F)")
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return "", 0, fmt.Errorf("has no host: want %s://[user:password@]host[:6379][/db]", strings.ToLower(u.Scheme))
	}
	if u.Fragment != "" {
		return "", 0, errors.New("a fragment (#…) means nothing here")
	}
	addr = u.Host
	if port := u.Port(); port == "" {
		addr = net.JoinHostPort(u.Hostname(), "6379")
	} else if !validPort(port) {
		return "", 0, fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	if p := strings.TrimPrefix(u.Path, "/"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return "", 0, errors.New("the path must be a database number, e.g. /0")
		}
		db = n
	}
	return addr, db, nil
}

// redisConfig reads the publisher's settings from the parameters of a
// redis:// URL. Every unknown parameter is named at once.
func redisConfig(q url.Values) (*outboxredis.Config, error) {
	known := append([]string{ParamRedisMaxLen, ParamRedisCreate, ParamRedisWait, ParamRedisWaitTimeout}, TLSParams...)
	var unknown []string
	for name, vals := range q {
		if !slices.Contains(known, name) {
			unknown = append(unknown, strconv.Quote(name))
		} else if len(vals) > 1 {
			return nil, fmt.Errorf("parameter %s is given %d times", name, len(vals))
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("unknown parameter %s (known: %s)", strings.Join(unknown, ", "), strings.Join(known, ", "))
	}
	cfg := &outboxredis.Config{CloseClient: true}
	if v := q.Get(ParamRedisMaxLen); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s=%q: want a whole number of entries, 0 for no trimming", ParamRedisMaxLen, v)
		}
		cfg.MaxLen = n
	}
	if v := q.Get(ParamRedisCreate); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: want true or false", ParamRedisCreate, v)
		}
		cfg.CreateStreams = b
	}
	if v := q.Get(ParamRedisWait); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s=%q: want a number of replicas", ParamRedisWait, v)
		}
		cfg.WaitReplicas = n
	}
	if v := q.Get(ParamRedisWaitTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Millisecond {
			return nil, fmt.Errorf("%s=%q: want a duration of at least 1ms, e.g. 500ms", ParamRedisWaitTimeout, v)
		}
		cfg.WaitTimeout = d
	}
	return cfg, nil
}

// redisOptions are the options of the client of a redis:// URL: its
// server, database, TLS and credentials, and timeouts long enough for
// the WAIT that cfg asks for.
func redisOptions(u *url.URL, addr string, db int, tlsCfg *tls.Config, cfg *outboxredis.Config) *redis.Options {
	ro := &redis.Options{
		Addr:                  addr,
		DB:                    db,
		TLSConfig:             tlsCfg,
		DialTimeout:           redisDialTimeout,
		DialerRetries:         2,
		ReadTimeout:           redisIOTimeout,
		WriteTimeout:          redisIOTimeout,
		ContextTimeoutEnabled: true,
	}
	if cfg.WaitReplicas > 0 {
		wt := cfg.WaitTimeout
		if wt == 0 {
			wt = outboxredis.DefaultWaitTimeout
		}
		ro.ReadTimeout = max(ro.ReadTimeout, wt+redisIOTimeout)
	}
	if u.User != nil {
		ro.Username = u.User.Username()
		ro.Password, _ = u.User.Password()
	}
	return ro
}

// redactRedis is Redact, also hiding a password whose unescaped '#' or
// '?' made the parser miss the userinfo ("redis://:pa#ss@host" parses as
// host ":" with a fragment): Redis passwords are often random strings.
func redactRedis(rawURL string, u *url.URL) string {
	s := Redact(rawURL)
	if u.User != nil {
		return s
	}
	i := strings.Index(s, "://")
	if at := strings.LastIndexByte(s, '@'); i >= 0 && at > i+3 {
		return s[:i+3] + "xxxxx" + s[at:]
	}
	return s
}
