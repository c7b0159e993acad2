package outboxredis_test

import (
	"crypto/tls"
	"net/url"
	"strings"
	"testing"

	"github.com/txoutbox/outbox/internal/testtls"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxurl"
)

// TestTLSAndCredentials runs a redis-server of the test's own that takes
// TLS only, wants client certificates and a password, and opens the
// publisher from rediss:// URLs as the outbox command does.
func TestTLSAndCredentials(t *testing.T) {
	t.Parallel()
	const password = "tls-s3cret-pw"
	ca := testtls.NewCA(t)
	server, client := ca.Server(t, "server", "redis.test"), ca.Client(t, "client")
	srv := newServer(t)
	srv.args = append(srv.args, "--tls-cert-file", server.CertFile, "--tls-key-file", server.KeyFile,
		"--tls-ca-cert-file", ca.File, "--tls-auth-clients", "yes", "--requirepass", password)
	srv.opts.Password = password
	srv.opts.TLSConfig = &tls.Config{RootCAs: ca.Pool, ServerName: "redis.test", Certificates: []tls.Certificate{client.TLS}, MinVersion: tls.VersionTLS12}
	srv.start()
	admin := srv.client(t, nil)
	createStream(t, admin, "orders")

	q := func(kv ...string) string {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v.Encode()
	}
	full := []string{"ca_file", ca.File, "cert_file", client.CertFile, "key_file", client.KeyFile, "server_name", "redis.test"}
	for _, tc := range []struct {
		name string
		url  string
		want publisher.ErrorClass // -1: delivered
		says string
	}{
		{"rediss", "rediss://:" + password + "@" + srv.Addr() + "/0?" + q(full...), -1, ""},
		{"tls=true", "redis://default:" + password + "@" + srv.Addr() + "?" + q(append(full, "tls", "true")...), -1, ""},
		{"no server_name", "rediss://:" + password + "@" + srv.Addr() + "?" + q(full[:6]...), publisher.ClassUnavailable, "127.0.0.1"},
		{"no client certificate", "rediss://:" + password + "@" + srv.Addr() + "?" + q("ca_file", ca.File, "server_name", "redis.test"), publisher.ClassUnavailable, "certificate"},
		{"no ca_file", "rediss://:" + password + "@" + srv.Addr() + "?" + q(full[2:]...), publisher.ClassUnavailable, "certificate"},
		{"wrong password", "rediss://:not-the-" + password + "@" + srv.Addr() + "?" + q(full...), publisher.ClassUnavailable, "WRONGPASS"},
		{"plain text to a TLS port", "redis://:" + password + "@" + srv.Addr(), publisher.ClassUnknown, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pub, err := outboxurl.Open(tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer pub.Close()
			e := env("orders", "k-"+tc.name, `{}`)
			err = publish(pub, e)[0]
			if tc.want == -1 {
				if err != nil {
					t.Fatal(err)
				}
				for _, got := range readAll(t, admin, "orders") {
					if got.ID == e.ID {
						return
					}
				}
				t.Fatalf("message %s confirmed but not in the stream", e.ID)
			}
			wantClass(t, err, tc.want, tc.says)
			if strings.Contains(err.Error(), password) {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}
