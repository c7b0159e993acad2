package outboxurl_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxmqtt"
)

func TestOpenMQTTErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ raw, want string }{
		{"mqtt://", "no host"},
		{"mqtt://:1883", "no host"},
		{"mqtt:broker", "no host"},
		{"mqtt://u:hunter2@a:1883,b:1883", "one broker per URL"},
		{"mqtt://u:hunter2@broker/orders", "no path"},
		{"mqtt://broker#frag", "no fragment"},
		{"mqtt://broker:0", "port"},
		{"mqtt://u:hunter2@broker?exchange=x", `unknown parameter "exchange"`},
		{"mqtt://broker?qos=2", "client_id, keepalive, session_expiry, clean_start, max_inflight, connect_timeout, tls, ca_file"},
		{"mqtt://broker?client_id=a&client_id=b", `"client_id" given 2 times`},
		{"mqtt://broker?client_id=", "client_id is empty"},
		{"mqtt://broker?keepalive=0", "keepalive"},
		{"mqtt://broker?keepalive=65536", "keepalive"},
		{"mqtt://broker?keepalive=1500ms", "whole seconds"},
		{"mqtt://broker?keepalive=soon", "keepalive"},
		{"mqtt://broker?session_expiry=-1", "session_expiry"},
		{"mqtt://broker?session_expiry=2000000h", "session_expiry"},
		{"mqtt://broker?clean_start=maybe", "clean_start"},
		{"mqtt://broker?max_inflight=0", "max_inflight"},
		{"mqtt://broker?max_inflight=70000", "max_inflight"},
		{"mqtt://broker?connect_timeout=-1s", "connect_timeout"},
		{"mqtt://u:hunter2@broker?tls=yes", "tls"},
		{"mqtts://u:hunter2@broker?cert_file=/nonexistent.pem", "cert_file and key_file go together"},
		{"mqtts://u:hunter2@broker?ca_file=/nonexistent/ca.pem", "ca_file"},
		{"mqtt://broker?client_id=a%09b", "ClientID"},
	} {
		openFails(t, tc.raw, nil, []string{tc.want}, "hunter2")
	}
}

// TestOpenMQTT opens a publisher from a URL and publishes through it to
// the local Mosquitto: a PUBACK is the broker's confirmation.
func TestOpenMQTT(t *testing.T) {
	t.Parallel()
	addr := brokertest.MQTTAddr
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		testdb.Unavailable(t, "Mosquitto at "+addr, err)
	}
	_ = c.Close()
	p := openAs[*outboxmqtt.Publisher](t, "mqtt://"+addr+"?client_id=outboxurl-test-"+strings.ReplaceAll(t.Name(), "/", "-")+"&keepalive=15&max_inflight=8", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := p.Publish(ctx, []*publisher.Envelope{{ID: "0190d2c4-7b1e-7cc0-9d4e-5a4f1b2c3d4e", Topic: "outboxurl.test", Destination: "outboxurl.test", Payload: []byte(`{}`), Attempt: 1}})
	if errs[0] != nil {
		t.Fatalf("Publish: %v", errs[0])
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}
