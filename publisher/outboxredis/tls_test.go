package outboxredis_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/publisher/outboxurl"
)

// pki is a throwaway CA with a server certificate for "redis.test" (and
// no IP address) and a client certificate, as PEM files.
type pki struct {
	dir                       string
	ca, serverCert, serverKey string
	clientCert, clientKey     string
	caPool                    *x509.CertPool
	clientPair                tls.Certificate
}

func newPKI(t testing.TB) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "outbox test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	p.caPool = x509.NewCertPool()
	p.caPool.AddCert(caCert)
	p.ca = p.write(t, "ca.pem", "CERTIFICATE", caDER)
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage, dns []string) (certFile, keyFile string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name}, DNSNames: dns,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, _ := x509.MarshalECPrivateKey(key)
		return p.write(t, name+".pem", "CERTIFICATE", der), p.write(t, name+".key", "EC PRIVATE KEY", kb)
	}
	p.serverCert, p.serverKey = leaf("server", 2, x509.ExtKeyUsageServerAuth, []string{"redis.test"})
	p.clientCert, p.clientKey = leaf("client", 3, x509.ExtKeyUsageClientAuth, nil)
	pair, err := tls.LoadX509KeyPair(p.clientCert, p.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	p.clientPair = pair
	return p
}

func (p *pki) write(t testing.TB, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTLSAndCredentials runs a redis-server of the test's own that takes
// TLS only, wants client certificates and a password, and opens the
// publisher from rediss:// URLs as the outbox command does.
func TestTLSAndCredentials(t *testing.T) {
	t.Parallel()
	const password = "tls-s3cret-pw"
	p := newPKI(t)
	srv := newServer(t)
	srv.args = append(srv.args, "--tls-cert-file", p.serverCert, "--tls-key-file", p.serverKey,
		"--tls-ca-cert-file", p.ca, "--tls-auth-clients", "yes", "--requirepass", password)
	srv.opts.Password = password
	srv.opts.TLSConfig = &tls.Config{RootCAs: p.caPool, ServerName: "redis.test", Certificates: []tls.Certificate{p.clientPair}, MinVersion: tls.VersionTLS12}
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
	full := []string{"ca_file", p.ca, "cert_file", p.clientCert, "key_file", p.clientKey, "server_name", "redis.test"}
	for _, tc := range []struct {
		name string
		url  string
		want outbox.ErrorClass // -1: delivered
		says string
	}{
		{"rediss", "rediss://:" + password + "@" + srv.Addr() + "/0?" + q(full...), -1, ""},
		{"tls=true", "redis://default:" + password + "@" + srv.Addr() + "?" + q(append(full, "tls", "true")...), -1, ""},
		{"no server_name", "rediss://:" + password + "@" + srv.Addr() + "?" + q(full[:6]...), outbox.ClassUnavailable, "127.0.0.1"},
		{"no client certificate", "rediss://:" + password + "@" + srv.Addr() + "?" + q("ca_file", p.ca, "server_name", "redis.test"), outbox.ClassUnavailable, "certificate"},
		{"no ca_file", "rediss://:" + password + "@" + srv.Addr() + "?" + q(full[2:]...), outbox.ClassUnavailable, "certificate"},
		{"wrong password", "rediss://:not-the-" + password + "@" + srv.Addr() + "?" + q(full...), outbox.ClassUnavailable, "WRONGPASS"},
		{"plain text to a TLS port", "redis://:" + password + "@" + srv.Addr(), outbox.ClassUnknown, ""},
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
