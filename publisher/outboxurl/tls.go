package outboxurl

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"strconv"
)

// TLS query parameters understood by every broker URL:
//
//	tls=true            use TLS (implied by the secure schemes amqps, rediss, mqtts)
//	ca_file=PATH        PEM bundle of CAs to trust instead of the system pool
//	cert_file=PATH      client certificate (PEM), with key_file
//	key_file=PATH       client key (PEM)
//	server_name=NAME    name to verify the server certificate against
//
// Certificate verification is never turned off.
const (
	ParamTLS        = "tls"
	ParamCAFile     = "ca_file"
	ParamCertFile   = "cert_file"
	ParamKeyFile    = "key_file"
	ParamServerName = "server_name"
)

// TLSParams are the TLS query parameter names, for brokers that must reject
// unknown parameters.
var TLSParams = []string{ParamTLS, ParamCAFile, ParamCertFile, ParamKeyFile, ParamServerName}

// TLSConfig returns the TLS configuration u asks for, or nil when it asks
// for none. secure says the scheme itself implies TLS. opts.TLS, when set,
// wins. Errors name the parameter and never include file contents.
func TLSConfig(u *url.URL, secure bool, opts *Options) (*tls.Config, error) {
	if opts != nil && opts.TLS != nil {
		return opts.TLS.Clone(), nil
	}
	q := u.Query()
	on := secure
	if v := q.Get(ParamTLS); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: want true or false", ParamTLS, v)
		}
		on = on || b
	}
	for _, p := range []string{ParamCAFile, ParamCertFile, ParamKeyFile, ParamServerName} {
		if q.Get(p) != "" {
			on = true
		}
	}
	if !on {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: q.Get(ParamServerName)}
	if cfg.ServerName == "" {
		cfg.ServerName = u.Hostname()
	}
	if ca := q.Get(ParamCAFile); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", ParamCAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s %s: no PEM certificates in it", ParamCAFile, ca)
		}
		cfg.RootCAs = pool
	}
	cert, key := q.Get(ParamCertFile), q.Get(ParamKeyFile)
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("%s and %s go together", ParamCertFile, ParamKeyFile)
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %v", ParamCertFile, ParamKeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// serverListTLS is TLSConfig for a URL that names a list of servers
// (nats://h1,h2), whose scheme implies no TLS: unless server_name or
// opts.TLS says otherwise, each server is verified against its own host
// name rather than the joined host list.
func serverListTLS(u *url.URL, opts *Options) (*tls.Config, error) {
	cfg, err := TLSConfig(u, false, opts)
	if err != nil || cfg == nil {
		return cfg, err
	}
	if (opts == nil || opts.TLS == nil) && u.Query().Get(ParamServerName) == "" {
		cfg.ServerName = ""
	}
	return cfg, nil
}
