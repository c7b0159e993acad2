package outboxnats_test

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

func TestMain(m *testing.M) {
	testdb.VerifyNoLeaks(m)
}

// natsURL is the local NATS server with JetStream the tests use.
var natsURL = brokertest.NATSURL

// connect opens a connection to the local NATS server, closed at cleanup.
func connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return connectTo(t, natsURL)
}

func connectTo(t testing.TB, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return brokertest.JetStream(t, url, append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond)}, opts...)...)
}

// newStream creates a stream capturing "<prefix>.>" and returns prefix,
// which is also the stream's name. The stream is deleted at cleanup.
func newStream(t testing.TB, js jetstream.JetStream, tweak func(*jetstream.StreamConfig)) string {
	t.Helper()
	name := testdb.RandomName("outboxtest_")
	cfg := jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Storage: jetstream.FileStorage}
	if tweak != nil {
		tweak(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatalf("create stream %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, name)
	})
	return name
}

// streamOf is the stream that captures a subject made by newStream.
func streamOf(subject string) string {
	s, _, _ := strings.Cut(subject, ".")
	return s
}

// streamCount is how many messages a stream holds.
func streamCount(t testing.TB, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("stream %s info: %v", stream, err)
	}
	return info.State.Msgs
}

// readStream reads the first n messages of a stream with an ordered
// consumer, failing the test if they do not arrive within d.
func readStream(t testing.TB, js jetstream.JetStream, stream string, n int, d time.Duration) []jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("ordered consumer on %s: %v", stream, err)
	}
	var out []jetstream.Msg
	for len(out) < n {
		if ctx.Err() != nil {
			t.Fatalf("received %d of %d messages from stream %s within %v", len(out), n, stream, d)
		}
		batch, err := cons.Fetch(min(n-len(out), 500), jetstream.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("fetch from %s: %v", stream, err)
				time.Sleep(50 * time.Millisecond)
			}
			continue
		}
		for m := range batch.Messages() {
			out = append(out, m)
		}
	}
	return out
}

// received is a JetStream message as the conformance suite sees it.
func received(m jetstream.Msg) publishertest.Received {
	h := map[string]string{}
	for k, v := range m.Headers() {
		if len(v) > 0 {
			h[k] = v[0]
		}
	}
	return publishertest.Received{
		ID:          h[jetstream.MsgIDHeader],
		Key:         h[publisher.HeaderBusinessKey],
		Topic:       h[publisher.HeaderTopic],
		Destination: m.Subject(),
		Payload:     m.Data(),
		Headers:     h,
	}
}

// server is a nats-server process of the test's own.
type server struct {
	t    testing.TB
	bin  string
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// URL is the server's client URL.
func (s *server) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(s.port) }

// startServer runs nats-server with JetStream on a spare port, storing in
// a temporary directory; it is killed at cleanup.
func startServer(t testing.TB) *server {
	t.Helper()
	s := &server{t: t, bin: brokertest.NATSServer(t), port: brokertest.FreePort(t), dir: t.TempDir()}
	s.start()
	t.Cleanup(s.stop)
	return s
}

// start runs the server and waits until it accepts connections.
func (s *server) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-js", "-sd", s.dir)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start nats-server: %v", err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(s.cmd, s.done)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(s.port), time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		select {
		case <-s.done:
			s.t.Fatalf("nats-server exited at start: %v", s.cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("nats-server did not listen on port %d within 20s: %v", s.port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop kills the server and waits for it to exit.
func (s *server) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s.cmd = nil
}
