package outboxmqtt_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxmqtt"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// brokerAddr is the shared local Mosquitto.
var brokerAddr = brokertest.MQTTAddr

// requireBroker checks that the shared Mosquitto answers.
func requireBroker(t testing.TB) {
	t.Helper()
	c, err := net.DialTimeout("tcp", brokerAddr, 3*time.Second)
	if err != nil {
		testdb.Unavailable(t, "Mosquitto at "+brokerAddr, err)
	}
	_ = c.Close()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// dial returns a publisher on addr, closed at cleanup.
func dial(t testing.TB, addr string, cfg *outboxmqtt.DialConfig) *outboxmqtt.Publisher {
	t.Helper()
	if cfg == nil {
		cfg = &outboxmqtt.DialConfig{}
	}
	cfg.Server = "mqtt://" + addr
	if cfg.Logger == nil {
		cfg.Logger = relaytest.Logger()
	}
	p, err := outboxmqtt.Dial(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// message is a PUBLISH as a subscriber received it.
type message struct {
	publishertest.Received
	ContentType string // the MQTT 5 Content Type property
	QoS         byte
}

// subscriber is a real MQTT 5 consumer: it subscribes at QoS 1 on every
// connection (so a broker restart that lost the session is healed) and
// records what arrives.
type subscriber struct {
	cm         *autopaho.ConnectionManager
	subscribed atomic.Bool // subscribed on the current connection
	connects   atomic.Int32

	mu  sync.Mutex
	got []message
	ids map[string]int
}

// subscribe connects a subscriber to addr for filter and waits until the
// subscription is in place. The session outlives a disconnect by 5
// minutes, so a blip of the connection loses nothing.
func subscribe(t testing.TB, addr, filter string) *subscriber {
	t.Helper()
	s := &subscriber{ids: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	u := &url.URL{Scheme: "mqtt", Host: addr}
	cm, err := autopaho.NewConnection(ctx, autopaho.ClientConfig{
		ServerUrls:                    []*url.URL{u},
		KeepAlive:                     10,
		CleanStartOnInitialConnection: true,
		SessionExpiryInterval:         300,
		ReconnectBackoff:              autopaho.NewConstantBackoff(100 * time.Millisecond),
		ConnectTimeout:                5 * time.Second,
		OnConnectionUp: func(cm *autopaho.ConnectionManager, _ *paho.Connack) {
			s.connects.Add(1)
			go func() {
				sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
				defer scancel()
				sa, err := cm.Subscribe(sctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 1}}})
				if err == nil && len(sa.Reasons) == 1 && sa.Reasons[0] == 1 {
					s.subscribed.Store(true)
				}
			}()
		},
		OnConnectionDown: func() bool { s.subscribed.Store(false); return true },
		ClientConfig: paho.ClientConfig{
			ClientID: "outbox-test-sub-" + randomHex(4),
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
				s.record(pr.Packet)
				return true, nil
			}},
		},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s.cm = cm
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer dcancel()
		_ = cm.Disconnect(dctx)
		cancel()
	})
	relaytest.WaitFor(t, 15*time.Second, "the subscription to "+filter+" at "+addr, s.subscribed.Load)
	return s
}

func (s *subscriber) record(p *paho.Publish) {
	m := message{Received: publishertest.Received{Destination: p.Topic, Payload: bytes.Clone(p.Payload), Headers: map[string]string{}}, QoS: p.QoS}
	if p.Properties != nil {
		m.ContentType = p.Properties.ContentType
		for _, u := range p.Properties.User {
			m.Headers[u.Key] = u.Value
		}
	}
	m.ID = m.Headers[outboxmqtt.PropertyMessageID]
	m.Key = m.Headers[publisher.HeaderBusinessKey]
	m.Topic = m.Headers[publisher.HeaderTopic]
	s.mu.Lock()
	s.got = append(s.got, m)
	s.ids[m.ID]++
	s.mu.Unlock()
}

// messages returns what arrived so far, in arrival order.
func (s *subscriber) messages() []message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]message(nil), s.got...)
}

// distinct is how many message ids arrived.
func (s *subscriber) distinct() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids)
}

func (s *subscriber) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids[id] > 0
}

// wait returns the first n messages, failing if they do not come in d.
func (s *subscriber) wait(t testing.TB, n int, d time.Duration) []message {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := s.messages()
		if len(got) >= n {
			return got[:n]
		}
		if time.Now().After(deadline) {
			t.Fatalf("received %d of %d messages in %v", len(got), n, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// mosquitto is a broker process of the test's own, on a spare port.
type mosquitto struct {
	t    testing.TB
	bin  string
	conf string
	addr string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	out  *bytes.Buffer
}

// startMosquitto runs a broker with persistence off and extra lines of
// configuration, stopped at cleanup.
func startMosquitto(t testing.TB, extra string) *mosquitto {
	t.Helper()
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		testdb.Unavailable(t, "the mosquitto binary", err)
	}
	port := brokertest.FreePort(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "mosquitto.conf")
	body := fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous true\npersistence false\n%s", port, extra)
	if os.Geteuid() == 0 {
		// Run as root, mosquitto would switch to user mosquitto, which
		// cannot read files under the test's private temporary directory.
		body += "user root\n"
	}
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	m := &mosquitto{t: t, bin: bin, conf: conf, addr: "127.0.0.1:" + strconv.Itoa(port), out: &bytes.Buffer{}}
	m.start()
	t.Cleanup(func() {
		m.kill()
		if t.Failed() {
			m.mu.Lock()
			t.Logf("mosquitto output:\n%s", m.out.String())
			m.mu.Unlock()
		}
	})
	return m
}

// start runs the broker and waits until it accepts connections.
func (m *mosquitto) start() {
	m.t.Helper()
	cmd := exec.Command(m.bin, "-c", m.conf)
	w := &lockedWriter{mu: &m.mu, w: m.out}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		m.t.Fatalf("start mosquitto: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	m.mu.Lock()
	m.cmd, m.done = cmd, done
	m.mu.Unlock()
	relaytest.WaitFor(m.t, 10*time.Second, "mosquitto to listen on "+m.addr, func() bool {
		select {
		case <-done:
			m.t.Fatalf("mosquitto exited at start:\n%s", m.output())
		default:
		}
		c, err := net.DialTimeout("tcp", m.addr, time.Second)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	})
}

// kill stops the broker at once (SIGKILL), as a crash would.
func (m *mosquitto) kill() {
	m.mu.Lock()
	cmd, done := m.cmd, m.done
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

func (m *mosquitto) output() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.out.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// env builds an envelope for dest as the relay would.
func env(dest, key, payload string) *publisher.Envelope {
	return publishertest.Envelope(dest, key, []byte(payload), "application/json", nil)
}

// publish publishes a batch with a deadline and returns the results.
func publish(p publisher.Publisher, d time.Duration, batch ...*publisher.Envelope) []error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return p.Publish(ctx, batch)
}
