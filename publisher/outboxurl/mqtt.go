package outboxurl

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxmqtt"
)

// MQTT URL parameters, beside the TLS ones (see TLSConfig):
//
//	mqtt://[user:pass@]host[:1883][?param=value&…]
//	mqtts://[user:pass@]host[:8883][?param=value&…]
//
//	client_id=ID        MQTT client identifier, unique per relay process; defaults to
//	                    "outbox-" and 16 random hex digits, kept across reconnections
//	keepalive=D         MQTT keep alive, whole seconds (30 or 30s); defaults to 30s
//	session_expiry=D    how long the broker keeps the session after a disconnect,
//	                    whole seconds; defaults to 0 (the session ends with the connection)
//	clean_start=B       false resumes the broker's session for client_id on the first
//	                    connection; defaults to true
//	max_inflight=N      PUBLISH packets awaiting PUBACK at once, capped by the server's
//	                    Receive Maximum; defaults to 64
//	connect_timeout=D   bound of one connection attempt (Go duration); defaults to 10s
const (
	MQTTParamClientID       = "client_id"
	MQTTParamKeepAlive      = "keepalive"
	MQTTParamSessionExpiry  = "session_expiry"
	MQTTParamCleanStart     = "clean_start"
	MQTTParamMaxInFlight    = "max_inflight"
	MQTTParamConnectTimeout = "connect_timeout"
)

var mqttParams = []string{MQTTParamClientID, MQTTParamKeepAlive, MQTTParamSessionExpiry, MQTTParamCleanStart, MQTTParamMaxInFlight, MQTTParamConnectTimeout}

func init() { register(openMQTT, "mqtt", "mqtts") }

// openMQTT returns an MQTT 5 publisher that connects in the background to
// the broker of an mqtt:// or mqtts:// URL and owns its connection.
func openMQTT(rawURL string, u *url.URL, opts *Options) (publisher.Publisher, error) {
	cfg, err := mqttDialConfig(rawURL, u, opts)
	if err != nil {
		return nil, err
	}
	p, err := outboxmqtt.Dial(cfg)
	if err != nil {
		return nil, fmt.Errorf("destination %s: %v", Redact(rawURL), err)
	}
	return p, nil
}

// mqttDialConfig reads an mqtt:// or mqtts:// URL. Errors are one line and
// never contain the password.
func mqttDialConfig(rawURL string, u *url.URL, opts *Options) (*outboxmqtt.DialConfig, error) {
	fail := func(format string, args ...any) (*outboxmqtt.DialConfig, error) {
		return nil, fmt.Errorf("destination %s: "+format, append([]any{Redact(rawURL)}, args...)...)
	}
	scheme := strings.ToLower(u.Scheme)
	secure := scheme == "mqtts"
	switch {
	case u.Opaque != "" || u.Hostname() == "":
		return fail("no host: write %s://host:%s", scheme, mqttPort(secure))
	case strings.Contains(u.Host, ","):
		return fail("one broker per URL: MQTT has no cluster bootstrap list")
	case u.Path != "" && u.Path != "/":
		return fail("MQTT URLs take no path (%q): the destination is the message topic", u.Path)
	case u.Fragment != "":
		return fail("MQTT URLs take no fragment")
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fail("port %q: want 1-65535", port)
		}
	}
	q := u.Query()
	if err := checkParams(q, mqttParams); err != nil {
		return fail("%v", err)
	}
	cfg := &outboxmqtt.DialConfig{ClientID: q.Get(MQTTParamClientID)}
	cfg.CloudEvents = opts.cloudEvents()
	if q.Has(MQTTParamClientID) && cfg.ClientID == "" {
		return fail("%s is empty", MQTTParamClientID)
	}
	var err error
	if cfg.KeepAlive, err = mqttSeconds(q, MQTTParamKeepAlive, 1, 65535); err != nil {
		return fail("%v", err)
	}
	if cfg.SessionExpiry, err = mqttSeconds(q, MQTTParamSessionExpiry, 0, 1<<32-1); err != nil {
		return fail("%v", err)
	}
	if v := q.Get(MQTTParamCleanStart); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fail("%s=%q: want true or false", MQTTParamCleanStart, v)
		}
		cfg.ResumeSession = !b
	}
	if v := q.Get(MQTTParamMaxInFlight); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 65535 {
			return fail("%s=%q: want an integer from 1 to 65535", MQTTParamMaxInFlight, v)
		}
		cfg.MaxInFlight = n
	}
	if cfg.ConnectTimeout, err = positiveDuration(q, MQTTParamConnectTimeout, 0); err != nil {
		return fail("%v", err)
	}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}
	if cfg.TLS, err = TLSConfig(u, secure, opts); err != nil {
		return fail("%v", err)
	}
	server := "mqtt"
	if cfg.TLS != nil {
		server = "mqtts"
	}
	port := u.Port()
	if port == "" {
		port = mqttPort(cfg.TLS != nil)
	}
	cfg.Server = server + "://" + net.JoinHostPort(u.Hostname(), port)
	return cfg, nil
}

func mqttPort(secure bool) string {
	if secure {
		return "8883"
	}
	return "1883"
}

// mqttSeconds reads a parameter in whole seconds: "30" or a Go duration
// such as "30s" or "1h". Absent is 0 (the default).
func mqttSeconds(q url.Values, name string, lo, hi int64) (time.Duration, error) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	bad := fmt.Errorf("%s=%q: want whole seconds from %d to %d, such as 30 or 30s", name, v, lo, hi)
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < lo || n > hi {
			return 0, bad
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d%time.Second != 0 || int64(d/time.Second) < lo || int64(d/time.Second) > hi {
		return 0, bad
	}
	return d, nil
}
