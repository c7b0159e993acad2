package outboxredis

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/txoutbox/outbox/publisher"
)

// serverErr is a Redis error reply as go-redis hands it over.
type serverErr string

func (e serverErr) Error() string { return string(e) }
func (serverErr) RedisError()     {}

var _ redis.Error = serverErr("")

// TestClassify covers replies and failures that the integration tests
// cannot provoke on demand (LOADING, failover replies, dial timeouts…).
func TestClassify(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, tc := range []struct {
		err  error
		ctx  context.Context
		want publisher.ErrorClass
		says string
	}{
		{redis.Nil, nil, publisher.ClassPermanent, "does not exist"},
		{serverErr("WRONGTYPE Operation against a key holding the wrong kind of value"), nil, publisher.ClassPermanent, "not a stream"},
		{serverErr("NOPERM User app has no permissions to access the 'orders' key"), nil, publisher.ClassPermanent, "may not write"},
		{fmt.Errorf("init: %w", serverErr("WRONGPASS invalid username-password pair or user is disabled.")), nil, publisher.ClassUnavailable, "WRONGPASS"},
		{serverErr("NOAUTH Authentication required."), nil, publisher.ClassUnavailable, "NOAUTH"},
		{serverErr("ERR max number of clients reached"), nil, publisher.ClassUnavailable, "max number of clients"},
		{serverErr("OOM command not allowed when used memory > 'maxmemory'."), nil, publisher.ClassUnavailable, "OOM"},
		{serverErr("LOADING Redis is loading the dataset in memory"), nil, publisher.ClassUnavailable, "LOADING"},
		{serverErr("BUSY Redis is busy running a script."), nil, publisher.ClassUnavailable, "BUSY"},
		{serverErr("READONLY You can't write against a read only replica."), nil, publisher.ClassUnavailable, "READONLY"},
		{serverErr("TRYAGAIN Multiple keys request during rehashing of slot"), nil, publisher.ClassTransient, "TRYAGAIN"},
		{serverErr("CLUSTERDOWN The cluster is down"), nil, publisher.ClassUnavailable, "CLUSTERDOWN"},
		{serverErr("MASTERDOWN Link with MASTER is down"), nil, publisher.ClassUnavailable, "MASTERDOWN"},
		{serverErr("NOREPLICAS Not enough good replicas to write."), nil, publisher.ClassUnavailable, "NOREPLICAS"},
		{serverErr("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk."), nil, publisher.ClassUnavailable, "MISCONF"},
		{serverErr("ERR something new"), nil, publisher.ClassTransient, "something new"},
		{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, nil, publisher.ClassUnavailable, "cannot reach"},
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}, nil, publisher.ClassUnavailable, "cannot reach"},
		{&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "redis.invalid", IsNotFound: true}}, nil, publisher.ClassUnavailable, "no such host"},
		{&net.OpError{Op: "dial", Net: "tcp", Err: context.Canceled}, cancelled, publisher.ClassTransient, "not sent"},
		{redis.ErrPoolTimeout, nil, publisher.ClassUnavailable, "pool timeout"},
		{&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, nil, publisher.ClassUnavailable, "cannot reach"},
		{tls.AlertError(42), nil, publisher.ClassUnavailable, "cannot reach"},
		{&net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")}, nil, publisher.ClassUnavailable, "certificate required"},
		{x509.HostnameError{Certificate: &x509.Certificate{}, Host: "redis.example"}, nil, publisher.ClassUnavailable, "redis.example"},
		{io.EOF, nil, publisher.ClassUnknown, "may have been written"},
		{timeout, nil, publisher.ClassUnknown, "may have been written"},
		{&net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}, nil, publisher.ClassUnknown, "may have been written"},
		{&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, nil, publisher.ClassUnknown, "may have been written"},
		{context.DeadlineExceeded, nil, publisher.ClassUnknown, "may have been written"},
		{redis.ErrClosed, nil, publisher.ClassTransient, "closed"},
	} {
		ctx := tc.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		err := classify(ctx, tc.err, "orders")
		if got := publisher.Classify(err); got != tc.want {
			t.Errorf("classify(%v) = %q, %v; want %v", tc.err, err, got, tc.want)
		}
		if !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), `"orders"`) {
			t.Errorf("classify(%v) = %q; want it to name the stream and say %q", tc.err, err, tc.says)
		}
		if !errors.Is(err, tc.err) && !isServerReply(tc.err) && !errors.Is(tc.err, redis.Nil) {
			t.Errorf("classify(%v) = %q does not wrap the cause", tc.err, err)
		}
	}
}

func TestHeadersJSON(t *testing.T) {
	t.Parallel()
	// The relay always sets the contract's headers; a caller that builds
	// envelopes by hand gets them filled in.
	b, err := headersJSON(&publisher.Envelope{Topic: "order.created", Key: "k1", Headers: map[string]string{"x": "<&>"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"content-type":"application/json","outbox-business-key":"k1","outbox-topic":"order.created","x":"<&>"}`; string(b) != want {
		t.Errorf("headers %s, want %s", b, want)
	}
	b, _ = headersJSON(&publisher.Envelope{Topic: "t", Headers: map[string]string{"content-type": "text/plain", "outbox-topic": "t"}})
	if want := `{"content-type":"text/plain","outbox-topic":"t"}`; string(b) != want {
		t.Errorf("headers %s, want %s", b, want)
	}
}
