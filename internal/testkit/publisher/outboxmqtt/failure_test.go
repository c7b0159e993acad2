package outboxmqtt_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"

	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxmqtt"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// deadAddr is a loopback address where nothing listens (below the
// ephemeral port range, so no client socket takes it meanwhile).
func deadAddr(t *testing.T) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(brokertest.FreePort(t))
}

// TestInvalidTopicIsPermanentWithoutSending: what MQTT cannot carry fails
// at once as permanent, before any connection is needed; the same batch's
// valid message is merely unavailable.
func TestInvalidTopicIsPermanentWithoutSending(t *testing.T) {
	t.Parallel()
	p := dial(t, deadAddr(t), &outboxmqtt.DialConfig{Config: outboxmqtt.Config{ConnectWait: 100 * time.Millisecond, Logger: relaytest.Logger()}})
	tab := env("ok.topic", "", `1`)
	tab.Headers["x-note"] = "a\tb"
	noName := env("ok.topic", "", `1`)
	noName.Headers[""] = "v"
	cases := []struct {
		env  *publisher.Envelope
		want string
	}{
		{env("sensor.+.temp", "", `1`), "wildcard"},
		{env("sensor.#", "", `1`), "wildcard"},
		{env("a\x00b", "", `1`), "NUL"},
		{env("", "", `1`), "empty topic"},
		{env(strings.Repeat("x", 65536), "", `1`), "65536 bytes"},
		{env("$SYS.broker", "", `1`), "'$'"},
		{env("bad\xffutf8", "", `1`), "UTF-8"},
		{env("line\nbreak", "", `1`), "control character"},
		{tab, "x-note"},
		{noName, "empty"},
	}
	batch := []*publisher.Envelope{env("fine.topic", "", `1`)}
	for _, c := range cases {
		batch = append(batch, c.env)
	}
	errs := publish(p, 10*time.Second, batch...)
	publishertest.WantClass(t, "valid topic while disconnected", errs[0], publisher.ClassUnavailable)
	for i, c := range cases {
		err := errs[i+1]
		publishertest.WantClass(t, "destination "+quote(c.env.Destination), err, publisher.ClassPermanent)
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("destination %s: error %q does not say %q", quote(c.env.Destination), err, c.want)
		}
	}
}

func quote(s string) string {
	if len(s) > 40 {
		s = s[:40]
	}
	return strconv.Quote(s)
}

// TestNotConnectedIsUnavailable: a broker that is not there makes every
// message unavailable, so the relay pauses the route without burning
// attempts.
func TestNotConnectedIsUnavailable(t *testing.T) {
	t.Parallel()
	p := dial(t, deadAddr(t), &outboxmqtt.DialConfig{Config: outboxmqtt.Config{ConnectWait: 200 * time.Millisecond, Logger: relaytest.Logger()}})
	errs := publish(p, 10*time.Second, env("a.b", "k1", `1`), env("a.b", "k2", `2`))
	for i, err := range errs {
		publishertest.WantClass(t, "publish while the broker is down", err, publisher.ClassUnavailable)
		if !strings.Contains(err.Error(), "not connected") {
			t.Errorf("message %d: %q does not say it is not connected", i, err)
		}
	}
	// The error tells the operator why.
	relaytest.WaitFor(t, 10*time.Second, "the error to give the reason", func() bool {
		err := publish(p, 10*time.Second, env("a.b", "k1", `1`))[0]
		return publisher.Classify(err) == publisher.ClassUnavailable && strings.Contains(err.Error(), "connection refused")
	})
}

// TestNotAuthorizedIsPermanent runs a Mosquitto whose ACL lets anonymous
// clients write only under open/: a PUBLISH elsewhere gets PUBACK 0x87,
// which is permanent, and a PUBLISH nobody subscribed to gets 0x10 "no
// matching subscribers", which is success.
func TestNotAuthorizedIsPermanent(t *testing.T) {
	t.Parallel()
	acl := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(acl, []byte("topic readwrite open/#\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := startMosquitto(t, "acl_file "+acl+"\n")
	p := dial(t, m.addr, &outboxmqtt.DialConfig{Config: outboxmqtt.Config{Logger: relaytest.Logger()}})
	errs := publish(p, 20*time.Second, env("closed.orders", "k", `1`), env("open.orders", "k2", `2`))
	publishertest.WantClass(t, "publish to a topic the ACL denies", errs[0], publisher.ClassPermanent)
	var pe *outboxmqtt.PubackError
	if !errors.As(errs[0], &pe) || pe.ReasonCode != 0x87 || pe.Topic != "closed/orders" {
		t.Fatalf("error %q: want a PubackError 0x87 for closed/orders, got %#v", errs[0], pe)
	}
	if !strings.Contains(errs[0].Error(), "not authorized") {
		t.Errorf("error %q does not say why", errs[0])
	}
	if errs[1] != nil {
		t.Fatalf("publish with no subscriber (PUBACK 0x10) failed: %v", errs[1])
	}
}

// TestTooLargeIsPermanentWithoutSending runs a Mosquitto with a small
// maximum packet size, which it announces in CONNACK: a larger message
// fails as permanent without being sent (Mosquitto would drop the whole
// connection for it), and the connection goes on serving.
func TestTooLargeIsPermanentWithoutSending(t *testing.T) {
	t.Parallel()
	m := startMosquitto(t, "max_packet_size 4000\n")
	dest := "big" + randomHex(4) + ".x"
	sub := subscribe(t, m.addr, outboxmqtt.Topic(dest))
	p := dial(t, m.addr, &outboxmqtt.DialConfig{Config: outboxmqtt.Config{Logger: relaytest.Logger()}})
	if errs := publish(p, 20*time.Second, env(dest, "warm", `0`)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	big, small := env(dest, "a", `"`+strings.Repeat("x", 5000)+`"`), env(dest, "b", `2`)
	errs := publish(p, 20*time.Second, big, small)
	publishertest.WantClass(t, "a 5000-byte message to a 4000-byte broker", errs[0], publisher.ClassPermanent)
	if !strings.Contains(errs[0].Error(), "maximum packet size is 4000") {
		t.Errorf("error %q does not name the limit", errs[0])
	}
	if errs[1] != nil {
		t.Fatalf("the small message of the same batch failed: %v", errs[1])
	}
	got := sub.wait(t, 2, 10*time.Second)
	if got[1].ID != small.ID || sub.has(big.ID) {
		t.Fatalf("subscriber got %v, want the warm-up and the small message only", got)
	}
}

// TestPubackReasonCodes checks the class of every PUBACK failure code on
// the client's real code path, against a scripted server.
func TestPubackReasonCodes(t *testing.T) {
	t.Parallel()
	codes := map[string]byte{}
	var mu sync.Mutex
	f := newFakeBroker(t, 100, func(p *packets.Publish, _ func(byte)) int {
		mu.Lock()
		defer mu.Unlock()
		return int(codes[p.Topic])
	})
	p := dial(t, f.addr(), &outboxmqtt.DialConfig{Config: outboxmqtt.Config{Logger: relaytest.Logger()}})
	cases := []struct {
		code byte
		want publisher.ErrorClass // -1: success
	}{
		{0x00, -1}, {0x10, -1},
		{0x87, publisher.ClassPermanent}, {0x90, publisher.ClassPermanent}, {0x99, publisher.ClassPermanent},
		{0x97, publisher.ClassTransient}, {0x83, publisher.ClassTransient}, {0x80, publisher.ClassTransient}, {0x91, publisher.ClassTransient},
	}
	var batch []*publisher.Envelope
	for i, c := range cases {
		e := env(fmt.Sprintf("codes.c%d", i), "", `1`)
		mu.Lock()
		codes[outboxmqtt.Topic(e.Destination)] = c.code
		mu.Unlock()
		batch = append(batch, e)
	}
	errs := publish(p, 20*time.Second, batch...)
	for i, c := range cases {
		if c.want == -1 {
			if errs[i] != nil {
				t.Errorf("PUBACK 0x%02X: %v, want success", c.code, errs[i])
			}
			continue
		}
		publishertest.WantClass(t, fmt.Sprintf("PUBACK 0x%02X", c.code), errs[i], c.want)
		var pe *outboxmqtt.PubackError
		if !errors.As(errs[i], &pe) || pe.ReasonCode != c.code || pe.Reason != "scripted answer" {
			t.Errorf("PUBACK 0x%02X: error %q, PubackError %#v", c.code, errs[i], pe)
		}
	}
}

// TestConnectionLostAfterSendIsUnknown: the server drops the connection
// once the PUBLISH arrived; the outcome is unknown, reported as soon as the
// connection is lost, not at the deadline.
func TestConnectionLostAfterSendIsUnknown(t *testing.T) {
	t.Parallel()
	f := newFakeBroker(t, 100, func(*packets.Publish, func(byte)) int { return -1 })
	p := dial(t, f.addr(), &outboxmqtt.DialConfig{Config: outboxmqtt.Config{Logger: relaytest.Logger()}})
	errs := publish(p, 5*time.Minute, env("lost.x", "k", `1`))
	publishertest.WantClass(t, "connection dropped after PUBLISH", errs[0], publisher.ClassUnknown)
	if !strings.Contains(errs[0].Error(), "connection to the broker lost") {
		t.Errorf("error %q does not say the connection was lost", errs[0])
	}
}

// TestNoPubackIsUnknown: a PUBLISH that gets no answer before the
// deadline is an unknown outcome, never a success.
func TestNoPubackIsUnknown(t *testing.T) {
	t.Parallel()
	f := newFakeBroker(t, 100, func(*packets.Publish, func(byte)) int { return -2 })
	p := dial(t, f.addr(), &outboxmqtt.DialConfig{Config: outboxmqtt.Config{Logger: relaytest.Logger()}})
	if errs := publish(p, 10*time.Second); len(errs) != 0 {
		t.Fatalf("empty batch: %v", errs)
	}
	errs := publish(p, 2*time.Second, env("silent.x", "a", `1`), env("silent.x", "b", `2`))
	for _, err := range errs {
		publishertest.WantClass(t, "no PUBACK before the deadline", err, publisher.ClassUnknown)
	}
}

// TestInFlightIsBounded: a server announcing Receive Maximum 3 never has
// more than 3 PUBLISH packets awaiting PUBACK, nor more than MaxInFlight,
// and a batch still goes out concurrently.
func TestInFlightIsBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		recvMax  uint16
		maxIn    int
		wantPeak int32
	}{{3, 0, 3}, {100, 2, 2}} {
		var outstanding, peak atomic.Int32
		f := newFakeBroker(t, tc.recvMax, func(_ *packets.Publish, ack func(byte)) int {
			n := outstanding.Add(1)
			for {
				old := peak.Load()
				if n <= old || peak.CompareAndSwap(old, n) {
					break
				}
			}
			time.AfterFunc(20*time.Millisecond, func() { outstanding.Add(-1); ack(0) })
			return -2
		})
		p := dial(t, f.addr(), &outboxmqtt.DialConfig{Config: outboxmqtt.Config{MaxInFlight: tc.maxIn, Logger: relaytest.Logger()}})
		var batch []*publisher.Envelope
		for i := range 30 {
			batch = append(batch, env("bounded.x", fmt.Sprint("k", i), `1`))
		}
		for i, err := range publish(p, 30*time.Second, batch...) {
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
		}
		if got := peak.Load(); got != tc.wantPeak {
			t.Errorf("receive maximum %d, MaxInFlight %d: peak of %d PUBLISH packets awaiting PUBACK, want %d", tc.recvMax, tc.maxIn, got, tc.wantPeak)
		}
	}
}

// TestReconnectsAfterBrokerRestart: a publisher outlives its broker's
// restart on the same port without being rebuilt.
func TestReconnectsAfterBrokerRestart(t *testing.T) {
	t.Parallel()
	m := startMosquitto(t, "")
	p := dial(t, m.addr, &outboxmqtt.DialConfig{Config: outboxmqtt.Config{ConnectWait: 200 * time.Millisecond, Logger: relaytest.Logger()}})
	if errs := publish(p, 20*time.Second, env("restart.x", "k", `1`)); errs[0] != nil {
		t.Fatal(errs[0])
	}
	m.kill()
	relaytest.WaitFor(t, 20*time.Second, "publishing to the stopped broker to fail as unavailable", func() bool {
		err := publish(p, 5*time.Second, env("restart.x", "k", `2`))[0]
		return err != nil && publisher.Classify(err) == publisher.ClassUnavailable
	})
	m.start()
	sub := subscribe(t, m.addr, "restart/x")
	e := env("restart.x", "k", `3`)
	relaytest.WaitFor(t, 30*time.Second, "publishing to succeed after the restart", func() bool {
		return publish(p, 5*time.Second, e)[0] == nil
	})
	if got := sub.wait(t, 1, 10*time.Second); got[0].ID != e.ID {
		t.Fatalf("after the restart the subscriber got %s, want %s", got[0].ID, e.ID)
	}
}

// TestCloseEndsPublishInProgress: Close does not wait for a PUBACK that
// will never come; the publish in progress fails (unknown) and no
// goroutine is left (see TestMain).
func TestCloseEndsPublishInProgress(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{}, 2)
	f := newFakeBroker(t, 100, func(*packets.Publish, func(byte)) int { arrived <- struct{}{}; return -2 })
	p := dial(t, f.addr(), &outboxmqtt.DialConfig{Config: outboxmqtt.Config{Logger: relaytest.Logger()}})
	done := make(chan []error, 1)
	go func() { done <- publish(p, 5*time.Minute, env("close.x", "k", `2`), env("close.x", "k2", `3`)) }()
	<-arrived
	<-arrived
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case errs := <-done:
		for i, err := range errs {
			publishertest.WantClass(t, fmt.Sprint("message ", i, " in flight at Close"), err, publisher.ClassUnknown)
		}
	case <-time.After(time.Minute):
		t.Fatal("Publish still running a minute after Close")
	}
	if err := publish(p, time.Second, env("close.x", "k", `4`))[0]; err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Publish after Close: %v", err)
	}
}
