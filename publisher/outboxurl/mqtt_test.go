package outboxurl_test

import (
	"context"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/brokertest"
	"github.com/txoutbox/outbox/internal/testdb"
	"github.com/txoutbox/outbox/internal/testtls"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxmqtt"
	"github.com/txoutbox/outbox/publisher/outboxurl"
)

func TestMQTTDialConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw  string
		want outboxmqtt.DialConfig
		tls  bool
	}{
		{raw: "mqtt://broker", want: outboxmqtt.DialConfig{Server: "mqtt://broker:1883"}},
		{raw: "MQTT://broker:1884/", want: outboxmqtt.DialConfig{Server: "mqtt://broker:1884"}},
		{raw: "mqtts://broker", want: outboxmqtt.DialConfig{Server: "mqtts://broker:8883"}, tls: true},
		{raw: "mqtt://broker?tls=true", want: outboxmqtt.DialConfig{Server: "mqtts://broker:8883"}, tls: true},
		{raw: "mqtt://[::1]:1883", want: outboxmqtt.DialConfig{Server: "mqtt://[::1]:1883"}},
		{raw: "mqtt://app:s3cret@broker", want: outboxmqtt.DialConfig{Server: "mqtt://broker:1883", Username: "app", Password: "s3cret"}},
		{raw: "mqtt://app%40corp:p%2Fw@broker", want: outboxmqtt.DialConfig{Server: "mqtt://broker:1883", Username: "app@corp", Password: "p/w"}},
		{
			raw: "mqtt://broker?client_id=relay-1&keepalive=15&session_expiry=1h&clean_start=false&max_inflight=10&connect_timeout=3s",
			want: outboxmqtt.DialConfig{
				Server: "mqtt://broker:1883", ClientID: "relay-1", KeepAlive: 15 * time.Second, SessionExpiry: time.Hour,
				ResumeSession: true, ConnectTimeout: 3 * time.Second, Config: outboxmqtt.Config{MaxInFlight: 10},
			},
		},
		{raw: "mqtt://broker?keepalive=45s&session_expiry=0&clean_start=true", want: outboxmqtt.DialConfig{Server: "mqtt://broker:1883", KeepAlive: 45 * time.Second}},
	} {
		u, err := url.Parse(tc.raw)
		if err != nil {
			t.Fatal(err)
		}
		got, err := outboxurl.MQTTDialConfig(tc.raw, u, nil)
		if err != nil {
			t.Errorf("%s: %v", tc.raw, err)
			continue
		}
		if (got.TLS != nil) != tc.tls {
			t.Errorf("%s: TLS %v, want %v", tc.raw, got.TLS != nil, tc.tls)
		}
		got.TLS = nil
		if *got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.raw, *got, tc.want)
		}
	}
}

func TestMQTTTLSParams(t *testing.T) {
	t.Parallel()
	ca := testtls.NewCA(t).File
	raw := "mqtts://broker.internal?ca_file=" + url.QueryEscape(ca) + "&server_name=mqtt.example"
	u, _ := url.Parse(raw)
	cfg, err := outboxurl.MQTTDialConfig(raw, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLS == nil || cfg.TLS.RootCAs == nil || cfg.TLS.ServerName != "mqtt.example" || cfg.TLS.InsecureSkipVerify {
		t.Fatalf("TLS %+v: want the CA file's pool, server name mqtt.example, verification on", cfg.TLS)
	}
	raw = "mqtts://broker.internal"
	u, _ = url.Parse(raw)
	if cfg, err = outboxurl.MQTTDialConfig(raw, u, nil); err != nil || cfg.TLS.ServerName != "broker.internal" {
		t.Fatalf("mqtts default: %v, %+v", err, cfg)
	}
}

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

// FuzzMQTTDialConfig: reading any URL never panics, and a password never
// shows in an error.
func FuzzMQTTDialConfig(f *testing.F) {
	for _, s := range []string{
		"mqtt://u:pw@broker:1883?client_id=x&keepalive=30",
		"mqtts://broker?session_expiry=1h&clean_start=false&max_inflight=5",
		"mqtt://broker?keepalive=99999999999999999999",
		"mqtt://[::1]:99999?tls=true",
		"mqtt://u:pw@a,b/c?#",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		cfg, err := outboxurl.MQTTDialConfig(raw, u, nil)
		if err != nil {
			if pw, ok := u.User.Password(); ok && len(pw) > 3 && strings.Contains(err.Error(), pw) && !strings.Contains(outboxurl.Redact(raw), pw) {
				t.Fatalf("error %q shows the password", err)
			}
			return
		}
		if cfg.Server == "" || cfg.KeepAlive < 0 || cfg.SessionExpiry < 0 || cfg.MaxInFlight < 0 {
			t.Fatalf("%q gave %+v", raw, cfg)
		}
	})
}
