// Package testtls makes throwaway certificates for tests that speak TLS:
// a CA, and server and client certificates it signs, written as PEM files
// into the test's temporary directory, where brokers started by the test
// and URLs' ca_file, cert_file and key_file parameters can read them.
package testtls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a throwaway certificate authority, valid from an hour ago for a
// day.
type CA struct {
	// File is the CA certificate's PEM file.
	File string
	// Pool holds the CA certificate, for a tls.Config's RootCAs.
	Pool *x509.CertPool

	dir    string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	serial int64
}

// Cert is a certificate signed by a CA, with its private key.
type Cert struct {
	// CertFile and KeyFile are the certificate's and its key's PEM files.
	CertFile, KeyFile string
	// TLS is the pair, for a tls.Config's Certificates.
	TLS tls.Certificate
}

// NewCA creates a CA and writes its certificate to ca.pem in a new
// t.TempDir(), where the certificates it issues are written too.
func NewCA(t testing.TB) *CA {
	t.Helper()
	ca := &CA{dir: t.TempDir(), key: newKey(t), serial: 1}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial), Subject: pkix.Name{CommonName: "outbox test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &ca.key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	if ca.cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	ca.Pool = x509.NewCertPool()
	ca.Pool.AddCert(ca.cert)
	ca.File = ca.write(t, "ca.pem", "CERTIFICATE", der)
	return ca
}

// Server issues a server certificate for hosts, each an IP address or a
// DNS name, written to name.pem and name.key.
func (ca *CA) Server(t testing.TB, name string, hosts ...string) *Cert {
	t.Helper()
	return ca.issue(t, name, x509.ExtKeyUsageServerAuth, hosts)
}

// Client issues a client certificate, written to name.pem and name.key.
func (ca *CA) Client(t testing.TB, name string) *Cert {
	t.Helper()
	return ca.issue(t, name, x509.ExtKeyUsageClientAuth, nil)
}

func (ca *CA) issue(t testing.TB, name string, usage x509.ExtKeyUsage, hosts []string) *Cert {
	t.Helper()
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial), Subject: pkix.Name{CommonName: name},
		NotBefore: ca.cert.NotBefore, NotAfter: ca.cert.NotAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	key := newKey(t)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &Cert{
		CertFile: ca.write(t, name+".pem", "CERTIFICATE", der),
		KeyFile:  ca.write(t, name+".key", "EC PRIVATE KEY", keyDER),
		TLS:      tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
	}
}

func (ca *CA) write(t testing.TB, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(ca.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
