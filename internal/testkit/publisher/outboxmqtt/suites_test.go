package outboxmqtt_test

import (
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/faultproxy"
	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/publisher/outboxmqtt"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// target is the Mosquitto at addr, with a QoS 1 MQTT 5 subscriber per
// destination as the plain consumer and Consume on a persistent session
// as the outbox one. The publisher reaches the broker through a fault
// proxy, so that its connection can be cut; the consumers connect
// directly. Topics with wildcards, which MQTT cannot publish to, are the
// bad destinations: the relay refuses them as topics before the publisher
// sees them (the publisher's own refusal is tested in failure_test.go).
func target(t *testing.T, addr string) *brokertest.Target {
	proxy := faultproxy.Start(t, addr)
	p := dial(t, proxy.Addr(), nil)
	subs := map[string]*subscriber{}
	return &brokertest.Target{
		Target: publishertest.Target{
			Publisher: p,
			NewDestination: func(t *testing.T) string {
				dest := "suite" + randomHex(6) + ".orders"
				subs[dest] = subscribe(t, addr, outboxmqtt.Topic(dest))
				return dest
			},
			Receive: func(t *testing.T, dest string, n int) []publishertest.Received {
				got := subs[dest].wait(t, n, 20*time.Second)
				out := make([]publishertest.Received, len(got))
				for i, m := range got {
					if m.Destination != outboxmqtt.Topic(dest) || m.QoS != 1 {
						t.Errorf("message %s arrived on %q at QoS %d, want %q at QoS 1", m.ID, m.Destination, m.QoS, outboxmqtt.Topic(dest))
					}
					if m.ContentType != m.Headers["content-type"] {
						t.Errorf("message %s: Content Type property %q, content-type user property %q", m.ID, m.ContentType, m.Headers["content-type"])
					}
					out[i] = m.Received
				}
				return out
			},
			Disconnect: proxy.Disconnect,
			Features:   publishertest.Features{Keys: true, ArbitraryHeaders: true},
		},
		Consume: func(t *testing.T, dest string, h brokertest.Handler) {
			runConsume(t, consumeConfig(addr, outboxmqtt.Topic(dest)), h)
		},
		PublishForeign: func(t *testing.T, dest string) {
			rawPublish(t, addr, outboxmqtt.Topic(dest), []byte("not from the outbox"))
		},
		BadDestinations: func(*testing.T) []brokertest.BadDestination {
			prefix := "dead" + randomHex(5)
			var bad []brokertest.BadDestination
			for _, topic := range []string{prefix + ".sensor.+.temp", prefix + ".sensor.#"} {
				bad = append(bad, brokertest.BadDestination{Topic: topic, Says: []string{"invalid topic", topic}})
			}
			return bad
		},
		URL:    "mqtt://" + addr,
		Broker: brokertest.Features{RedeliversOnReconnect: true, KeepsOrder: true},
	}
}

// shared is the target on the shared local Mosquitto.
func shared(t *testing.T) *brokertest.Target {
	requireBroker(t)
	return target(t, brokerAddr)
}

// TestSuites runs the conformance, consume and relay suites on the shared Mosquitto.
func TestSuites(t *testing.T) {
	brokertest.Run(t, shared)
}

// TestCrashEndToEnd runs the crash test on a broker of the test's own,
// queueing without limit (max_queued_messages 0): with Mosquitto's
// default of 1000, a consumer that falls behind the burst loses messages.
func TestCrashEndToEnd(t *testing.T) {
	brokertest.RunCrash(t, func(t *testing.T) *brokertest.Target {
		return target(t, startMosquitto(t, "max_queued_messages 0\n").addr)
	})
}

// TestOutage runs the outage test with a broker of the test's own killed
// (SIGKILL) and started again on the same port.
//
// The broker keeps nothing across the restart (persistence false), so the
// subscriber must be subscribed again before the relay may publish: with
// no subscriber MQTT acknowledges a message and drops it (PUBACK 0x10).
// The publisher therefore reaches the broker through a TCP proxy that
// stays shut until the subscriber is back; the subscriber connects
// directly.
func TestOutage(t *testing.T) {
	t.Parallel()
	brokertest.RunOutage(t, brokertest.Outage{Name: "BrokerKilled", Start: func(t *testing.T) *brokertest.OutageTarget {
		m := startMosquitto(t, "")
		proxy := faultproxy.Start(t, m.addr)
		prefix := "outage" + randomHex(4)
		sub := subscribe(t, m.addr, prefix+"/#")
		var connects int32
		return &brokertest.OutageTarget{
			Publisher:   dial(t, proxy.Addr(), nil),
			Destination: prefix + ".flow",
			Arrivals: func(*testing.T) []publishertest.Received {
				var out []publishertest.Received
				for _, msg := range sub.messages() {
					out = append(out, msg.Received)
				}
				return out
			},
			Down: func(*testing.T) {
				connects = sub.connects.Load()
				m.kill()
				proxy.SetMode(faultproxy.Refuse)
			},
			Up: func(t *testing.T) {
				m.start()
				relaytest.WaitFor(t, 30*time.Second, "the subscriber to reconnect and subscribe again", func() bool {
					return sub.connects.Load() > connects && sub.subscribed.Load()
				})
				proxy.SetMode(faultproxy.Pass)
			},
			MaxAttempts: 2,
		}
	}})
}
