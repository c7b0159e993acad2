package outboxmqtt

import (
	"bytes"
	"strings"
	"testing"

	"github.com/txoutbox/outbox/publisher"
)

// TestPacketSize checks the size computed for the server's maximum packet
// size against the bytes paho writes.
func TestPacketSize(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 100, 16_000, 2_100_000} {
		env := &publisher.Envelope{
			ID: "0190d2c4-7b1e-7cc0-9d4e-5a4f1b2c3d4e", Destination: "order.created." + strings.Repeat("é", n%50),
			Payload: bytes.Repeat([]byte{0xff}, n),
			Headers: map[string]string{publisher.HeaderTopic: "order.created", publisher.HeaderContentType: "application/octet-stream", "x-" + strings.Repeat("k", n%300): strings.Repeat("v", n%70000%65535)},
		}
		pub, err := packet(env, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		pkt := pub.Packet()
		pkt.PacketID = 65535
		var buf bytes.Buffer
		if _, err := pkt.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		if got := packetSize(pub); got != buf.Len() {
			t.Errorf("payload %d: computed %d bytes, paho writes %d", n, got, buf.Len())
		}
		if _, err := packet(env, uint32(buf.Len()), nil); err != nil {
			t.Errorf("payload %d: a packet of exactly the maximum size refused: %v", n, err)
		}
		if _, err := packet(env, uint32(buf.Len()-1), nil); publisher.Classify(err) != publisher.ClassPermanent {
			t.Errorf("payload %d: a packet one byte over the maximum: %v", n, err)
		}
	}
}

// TestPacketProperties: the id comes first, then every header sorted by
// name; a header named like the id property cannot shadow it.
func TestPacketProperties(t *testing.T) {
	t.Parallel()
	env := &publisher.Envelope{ID: "id-1", Destination: "a.b", Headers: map[string]string{
		"zeta": "z", publisher.HeaderContentType: "text/plain", PropertyMessageID: "forged", publisher.HeaderTopic: "a.b",
	}}
	pub, err := packet(env, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range pub.Properties.User {
		got = append(got, u.Key+"="+u.Value)
	}
	want := "message-id=id-1 content-type=text/plain outbox-topic=a.b zeta=z"
	if strings.Join(got, " ") != want || pub.Properties.ContentType != "text/plain" || pub.QoS != 1 || pub.Retain || pub.Topic != "a/b" {
		t.Fatalf("properties %v, content type %q, QoS %d, topic %q; want %s", got, pub.Properties.ContentType, pub.QoS, pub.Topic, want)
	}
}

func TestTopic(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"order.created": "order/created", "a": "a", "a.b.c": "a/b/c", "tenant:1.x-y": "tenant:1/x-y"} {
		if got := Topic(in); got != want {
			t.Errorf("Topic(%q) = %q, want %q", in, got, want)
		}
		if why := invalidTopic(Topic(in)); why != "" {
			t.Errorf("Topic(%q) = %q is invalid: %s", in, Topic(in), why)
		}
	}
}
