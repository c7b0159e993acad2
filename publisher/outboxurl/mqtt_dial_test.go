package outboxurl

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/testtls"
	"github.com/txoutbox/outbox/publisher/outboxmqtt"
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
		got, err := mqttDialConfig(tc.raw, u, nil)
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
	cfg, err := mqttDialConfig(raw, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLS == nil || cfg.TLS.RootCAs == nil || cfg.TLS.ServerName != "mqtt.example" || cfg.TLS.InsecureSkipVerify {
		t.Fatalf("TLS %+v: want the CA file's pool, server name mqtt.example, verification on", cfg.TLS)
	}
	raw = "mqtts://broker.internal"
	u, _ = url.Parse(raw)
	if cfg, err = mqttDialConfig(raw, u, nil); err != nil || cfg.TLS.ServerName != "broker.internal" {
		t.Fatalf("mqtts default: %v, %+v", err, cfg)
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
		cfg, err := mqttDialConfig(raw, u, nil)
		if err != nil {
			if pw, ok := u.User.Password(); ok && len(pw) > 3 && strings.Contains(err.Error(), pw) && !strings.Contains(Redact(raw), pw) {
				t.Fatalf("error %q shows the password", err)
			}
			return
		}
		if cfg.Server == "" || cfg.KeepAlive < 0 || cfg.SessionExpiry < 0 || cfg.MaxInFlight < 0 {
			t.Fatalf("%q gave %+v", raw, cfg)
		}
	})
}
