package outboxredis_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

func TestMain(m *testing.M) {
	if os.Getenv("OUTBOX_TEST_LOG") == "" {
		// go-redis logs every failed dial; the outage tests make many.
		redis.SetLogger(quietRedisLog{})
	}
	testdb.VerifyNoLeaks(m)
}

type quietRedisLog struct{}

func (quietRedisLog) Printf(context.Context, string, ...any) {}

// redisAddr is the shared local Redis the conformance and end-to-end tests
// use, with keys of their own.
var redisAddr = brokertest.RedisAddr

// localClient is a client of the shared Redis, closed at cleanup.
func localClient(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: redisAddr, ContextTimeoutEnabled: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		testdb.Unavailable(t, "Redis at "+redisAddr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// streamName returns a fresh name (a valid topic too) whose key is
// deleted at cleanup. The stream is not created.
func streamName(t testing.TB, admin *redis.Client, what string) string {
	t.Helper()
	name := testdb.RandomName("outboxtest." + what + ".")
	t.Cleanup(func() { _ = admin.Del(context.Background(), name).Err() })
	return name
}

// localStream is a client of the local Redis and a new empty stream on
// it, named after what.
func localStream(t testing.TB, what string) (*redis.Client, string) {
	t.Helper()
	admin := localClient(t)
	stream := streamName(t, admin, what)
	createStream(t, admin, stream)
	return admin, stream
}

// createStream creates an empty stream the way an operator would: with
// a consumer group.
func createStream(t testing.TB, admin *redis.Client, name string) {
	t.Helper()
	if err := admin.XGroupCreateMkStream(context.Background(), name, "consumers", "$").Err(); err != nil {
		t.Fatalf("XGROUP CREATE %s MKSTREAM: %v", name, err)
	}
}

// entry is a stream entry as a consumer decodes it.
type entry struct {
	EntryID string
	publishertest.Received
}

func decode(t testing.TB, stream string, m redis.XMessage) entry {
	t.Helper()
	str := func(f string) string {
		v, ok := m.Values[f]
		if !ok {
			t.Fatalf("entry %s of %s has no field %q: %v", m.ID, stream, f, m.Values)
		}
		s, _ := v.(string)
		return s
	}
	var h map[string]string
	if err := json.Unmarshal([]byte(str("headers")), &h); err != nil {
		t.Fatalf("entry %s: headers %q are not a JSON object of strings: %v", m.ID, str("headers"), err)
	}
	return entry{EntryID: m.ID, Received: publishertest.Received{
		ID: str("message_id"), Topic: str("topic"), Key: str("business_key"),
		Destination: stream, Payload: []byte(str("payload")), Headers: h,
	}}
}

// readAll is a consumer: it reads the whole stream from the start with
// XREAD.
func readAll(t testing.TB, c *redis.Client, stream string) []entry {
	t.Helper()
	var out []entry
	last := "0"
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := c.XRead(ctx, &redis.XReadArgs{Streams: []string{stream, last}, Count: 1000, Block: -1}).Result()
		cancel()
		if err == redis.Nil {
			return out
		}
		if err != nil {
			t.Fatalf("XREAD %s: %v", stream, err)
		}
		if len(res) == 0 || len(res[0].Messages) == 0 {
			return out
		}
		for _, m := range res[0].Messages {
			out = append(out, decode(t, stream, m))
			last = m.ID
		}
	}
}

// waitEntries reads stream until it holds at least n entries.
func waitEntries(t testing.TB, c *redis.Client, stream string, n int, within time.Duration) []entry {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := readAll(t, c, stream)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s holds %d entries after %v, want %d", stream, len(got), within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// server is a redis-server process of the test's own, on a spare port,
// keeping its data in a directory of the test so that a restart on the
// same port and directory finds it again.
type server struct {
	t    testing.TB
	bin  string
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
	opts *redis.Options // how readiness is checked
}

// startServer starts redis-server with extra arguments; it is killed at
// cleanup.
func startServer(t testing.TB, extra ...string) *server {
	t.Helper()
	s := newServer(t)
	s.args = append(s.args, extra...)
	s.start()
	return s
}

// newServer prepares a server on a spare port without starting it: args
// and opts may be completed first.
func newServer(t testing.TB) *server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testdb.Unavailable(t, "the redis-server binary", err)
	}
	s := &server{t: t, bin: bin, port: brokertest.FreePort(t), dir: t.TempDir()}
	s.args = []string{"--bind", "127.0.0.1", "--save", "", "--dir", s.dir, "--logfile", "redis.log"}
	s.opts = &redis.Options{Addr: s.Addr()}
	t.Cleanup(s.kill)
	return s
}

// Addr is the server's host:port.
func (s *server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// portArgs listens on the server's port, in TLS when opts ask for it.
func (s *server) portArgs() []string {
	if s.opts.TLSConfig != nil {
		return []string{"--port", "0", "--tls-port", strconv.Itoa(s.port)}
	}
	return []string{"--port", strconv.Itoa(s.port)}
}

// start runs the server and waits until it answers PING.
func (s *server) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, append(s.portArgs(), s.args...)...)
	s.cmd.Dir = s.dir
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	c := redis.NewClient(s.opts)
	defer c.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			s.t.Fatalf("redis-server on port %d did not answer: %v\n%s", s.port, err, tail(string(log), 2000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill stops the server at once (SIGKILL), as a crash would.
func (s *server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
	s.cmd = nil
}

// client is a client of this server, closed at cleanup.
func (s *server) client(t testing.TB, tweak func(*redis.Options)) *redis.Client {
	o := *s.opts
	o.ContextTimeoutEnabled = true
	if tweak != nil {
		tweak(&o)
	}
	c := redis.NewClient(&o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// mustDo runs a command on c, failing the test on error.
func mustDo(t testing.TB, c *redis.Client, args ...any) any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := c.Do(ctx, args...).Result()
	if err != nil {
		t.Fatalf("%s: %v", strings.TrimSpace(fmt.Sprintln(args...)), err)
	}
	return v
}
