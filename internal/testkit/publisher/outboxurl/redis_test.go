package outboxurl_test

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxredis"
	"github.com/txoutbox/outbox/publisher/outboxurl"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// openRedis opens raw, failing the test unless it is a Redis publisher,
// and returns it with its client's options.
func openRedis(t *testing.T, raw string, opts *outboxurl.Options) (*outboxredis.Publisher, *redis.Options) {
	t.Helper()
	rp := openAs[*outboxredis.Publisher](t, raw, opts)
	c, ok := rp.Client().(*redis.Client)
	if !ok {
		t.Fatalf("Open(%q) client is %T, want *redis.Client", raw, rp.Client())
	}
	return rp, c.Options()
}

// TestOpenRedisParses checks what each URL form sets on the client. No
// connection is made: the client connects on first use.
func TestOpenRedisParses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw              string
		addr, user, pass string
		db               int
		tls              string // expected ServerName; "" for no TLS
	}{
		{"redis://cache.internal", "cache.internal:6379", "", "", 0, ""},
		{"redis://cache.internal:6380/", "cache.internal:6380", "", "", 0, ""},
		{"REDIS://cache.internal/3", "cache.internal:6379", "", "", 3, ""},
		{"redis://:p%40ss@cache.internal:6379/0", "cache.internal:6379", "", "p@ss", 0, ""},
		{"redis://relay:pw@cache.internal:6379/15?maxlen=100000&create=true", "cache.internal:6379", "relay", "pw", 15, ""},
		{"redis://[::1]:7000/1", "[::1]:7000", "", "", 1, ""},
		{"redis://[::1]", "[::1]:6379", "", "", 0, ""},
		{"rediss://relay:pw@cache.example.com:6380/0", "cache.example.com:6380", "relay", "pw", 0, "cache.example.com"},
		{"redis://10.0.0.5?tls=true&server_name=cache.example.com", "10.0.0.5:6379", "", "", 0, "cache.example.com"},
		{"redis://cache.internal?wait=1&wait_timeout=250ms&tls=false", "cache.internal:6379", "", "", 0, ""},
	} {
		_, o := openRedis(t, tc.raw, nil)
		if o.Addr != tc.addr || o.Username != tc.user || o.Password != tc.pass || o.DB != tc.db {
			t.Errorf("Open(%q): addr %q user %q password %q db %d; want %q %q %q %d", tc.raw, o.Addr, o.Username, o.Password, o.DB, tc.addr, tc.user, tc.pass, tc.db)
		}
		switch {
		case tc.tls == "" && o.TLSConfig != nil:
			t.Errorf("Open(%q) uses TLS", tc.raw)
		case tc.tls != "" && o.TLSConfig == nil:
			t.Errorf("Open(%q) does not use TLS", tc.raw)
		case tc.tls != "" && (o.TLSConfig.ServerName != tc.tls || o.TLSConfig.InsecureSkipVerify || o.TLSConfig.MinVersion < tls.VersionTLS12):
			t.Errorf("Open(%q): TLS server name %q, skip verify %v, min version %x", tc.raw, o.TLSConfig.ServerName, o.TLSConfig.InsecureSkipVerify, o.TLSConfig.MinVersion)
		}
		if !o.ContextTimeoutEnabled {
			t.Errorf("Open(%q): the relay's deadline would not bound round trips", tc.raw)
		}
	}
	// The WAIT timeout fits inside the read timeout.
	if _, o := openRedis(t, "redis://h?wait=2&wait_timeout=30s", nil); o.ReadTimeout <= 30*time.Second {
		t.Errorf("read timeout %v with wait_timeout=30s", o.ReadTimeout)
	}
	// Options.TLS wins over the URL.
	mine := &tls.Config{ServerName: "from-options", MinVersion: tls.VersionTLS13}
	if _, o := openRedis(t, "redis://h", &outboxurl.Options{TLS: mine}); o.TLSConfig == nil || o.TLSConfig.ServerName != "from-options" {
		t.Errorf("Options.TLS not used: %+v", o.TLSConfig)
	}
}

func TestOpenRedisErrors(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-secret"
	for _, tc := range []struct {
		raw  string
		want []string
	}{
		{"redis://", []string{"has no host"}},
		{"redis:///0", []string{"has no host"}},
		{"redis:cache", []string{"has no host"}},
		{"redis://:" + secret + "@:6379/0", []string{"has no host", "xxxxx"}},
		{"redis://h:0", []string{`port "0"`}},
		{"redis://h:70000", []string{`port "70000"`}},
		{"redis://h/abc", []string{"redis://h/abc", "database number"}},
		{"redis://h/-1", []string{"database number"}},
		{"redis://h/0/1", []string{"database number"}},
		{"redis://h#frag", []string{"fragment"}},
		{"redis://h?maxlen=-1", []string{`maxlen="-1"`}},
		{"redis://h?maxlen=lots", []string{`maxlen="lots"`}},
		{"redis://h?create=maybe", []string{`create="maybe"`, "true or false"}},
		{"redis://h?wait=x", []string{`wait="x"`}},
		{"redis://h?wait_timeout=soon", []string{`wait_timeout="soon"`}},
		{"redis://h?wait_timeout=0s", []string{`wait_timeout="0s"`}},
		{"redis://h?maxlen=1&maxlen=2", []string{"maxlen is given 2 times"}},
		{"redis://h?streams=x&bogus=1", []string{`unknown parameter "bogus", "streams"`, "maxlen, create, wait, wait_timeout, tls, ca_file"}},
		{"redis://relay:" + secret + "@h?password=" + secret, []string{`unknown parameter "password"`, "relay:xxxxx@"}},
		{"redis://:" + secret + "#x@h/0", []string{"redis://xxxxx@h/0", "not a valid URL"}},
		{"redis://:6379#" + secret + "@h/0", []string{"redis://xxxxx@h/0", "percent-encode"}},
		{"redis://:6379?" + secret + "@h/0", []string{"redis://xxxxx@h/0", "percent-encode"}},
		{"redis://:6379/" + secret + "@h/0", []string{"redis://xxxxx@h/0", "percent-encode"}},
		{"rediss://:" + secret + "@h?ca_file=/nonexistent/ca.pem", []string{"ca_file", "/nonexistent/ca.pem"}},
		{"rediss://h?cert_file=/x.pem", []string{"cert_file and key_file go together"}},
		{"redis://h?tls=yes-please", []string{`tls="yes-please"`}},
	} {
		openFails(t, tc.raw, nil, tc.want, secret)
	}
}

// TestOpenRedisPublishes drives the URL parameters against the local
// Redis.
func TestOpenRedisPublishes(t *testing.T) {
	t.Parallel()
	addr := brokertest.RedisAddr
	admin := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = admin.Close() })
	ctx := context.Background()
	if err := admin.Ping(ctx).Err(); err != nil {
		testdb.Unavailable(t, "Redis at "+addr, err)
	}
	name := func(what string) string {
		n := "outboxtest.url." + what + "." + publishertest.NewID()[:8]
		t.Cleanup(func() { _ = admin.Del(context.Background(), n).Err() })
		return n
	}
	send := func(p publisher.Publisher, dest string, n int) []error {
		var batch []*publisher.Envelope
		for i := 0; i < n; i++ {
			batch = append(batch, publishertest.Envelope(dest, "k"+publishertest.NewID()[:4], []byte(`{}`), "application/json", nil))
		}
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		return p.Publish(ctx, batch)
	}

	existing := name("existing")
	if err := admin.XGroupCreateMkStream(ctx, existing, "g", "$").Err(); err != nil {
		t.Fatal(err)
	}
	plain, _ := openRedis(t, "redis://"+addr+"/0", nil)
	if err := send(plain, existing, 1)[0]; err != nil {
		t.Fatalf("publish: %v", err)
	}
	missing := name("missing")
	if err := send(plain, missing, 1)[0]; publisher.Classify(err) != publisher.ClassPermanent || !errors.Is(err, outboxredis.ErrStreamNotFound) {
		t.Fatalf("publish to a missing stream without create=true: %v", err)
	}

	create, _ := openRedis(t, "redis://"+addr+"?create=true", nil)
	if err := send(create, missing, 1)[0]; err != nil {
		t.Fatalf("create=true: %v", err)
	}
	if n, _ := admin.XLen(ctx, missing).Result(); n != 1 {
		t.Fatalf("create=true: XLEN %d, want 1", n)
	}

	trimmed := name("maxlen")
	maxlen, _ := openRedis(t, "redis://"+addr+"?create=true&maxlen=5", nil)
	for i := 0; i < 4; i++ {
		for _, err := range send(maxlen, trimmed, 100) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if n, _ := admin.XLen(ctx, trimmed).Result(); n >= 400 || n < 5 {
		t.Fatalf("maxlen=5: XLEN %d after 400 entries", n)
	}

	wait, _ := openRedis(t, "redis://"+addr+"?wait=1&wait_timeout=20ms", nil)
	if err := send(wait, existing, 1)[0]; publisher.Classify(err) != publisher.ClassUnknown || !strings.Contains(err.Error(), "replicas") {
		t.Fatalf("wait=1 with no replica: %v, want an unknown outcome", err)
	}
}

// FuzzOpenRedis: any redis URL opens or fails with one line that never
// shows the password.
func FuzzOpenRedis(f *testing.F) {
	for _, s := range []string{
		"redis://:pw@h:6379/0?maxlen=10&create=true",
		"rediss://u:pw@h/1?wait=1&wait_timeout=1s&server_name=x",
		"redis://u:pw@[::1]:1/2?tls=true",
		"redis://u:p%2Fw@h?ca_file=",
		"redis://:#000@0", // a '#' in a password hides the userinfo from the parser
		"redis://0:/000@0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !strings.HasPrefix(strings.ToLower(raw), "redis") {
			raw = "redis://" + raw
		}
		p, err := outboxurl.Open(raw, nil)
		if err != nil {
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Fatalf("error is not one line: %q", msg)
			}
			if i := strings.Index(raw, "://"); i >= 0 {
				if at := strings.LastIndexByte(raw, '@'); at > i {
					if _, pw, ok := strings.Cut(raw[i+3:at], ":"); ok && len(pw) >= 4 && strings.Contains(msg, pw) {
						t.Fatalf("error %q shows the password %q", msg, pw)
					}
				}
			}
			return
		}
		_ = p.Close()
	})
}
