package outboxredis

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/txoutbox/outbox/publisher"
)

// ErrStreamNotFound is wrapped by the permanent error of a message sent to
// a stream that does not exist while Config.CreateStreams is off.
var ErrStreamNotFound = errors.New("stream does not exist")

// isServerReply reports whether err is Redis' answer to the command (or
// the nil reply), as opposed to a failure of the connection.
func isServerReply(err error) bool {
	var rerr redis.Error
	return errors.Is(err, redis.Nil) || errors.As(err, &rerr)
}

// serverWide are the error codes of a server that refuses every write for
// a while, whatever the message.
var serverWide = map[string]bool{
	"OOM": true, "LOADING": true, "BUSY": true, "READONLY": true, "MASTERDOWN": true,
	"CLUSTERDOWN": true, "NOREPLICAS": true, "MISCONF": true,
}

// classify turns the failure of one XADD into the error the relay acts on.
// ctx is the publish's context.
func classify(ctx context.Context, err error, stream string) error {
	if errors.Is(err, redis.Nil) {
		// NOMKSTREAM answers nil when the stream is missing.
		return publisher.Permanent(fmt.Errorf("outboxredis: XADD %q: %w; create it (e.g. XGROUP CREATE %s <group> $ MKSTREAM) or set create=true", stream, ErrStreamNotFound, stream))
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		msg := oneLine(rerr.Error())
		code, _, _ := strings.Cut(msg, " ")
		switch {
		case code == "WRONGTYPE":
			return publisher.Permanent(fmt.Errorf("outboxredis: XADD %q: the key holds a value that is not a stream (%s)", stream, msg))
		case code == "NOPERM":
			return publisher.Permanent(fmt.Errorf("outboxredis: XADD %q: the Redis user may not write this key (%s)", stream, msg))
		case code == "NOAUTH" || code == "WRONGPASS" || strings.HasPrefix(msg, "ERR max number of clients"):
			// Refused at the handshake, before anything was sent.
			return publisher.Unavailable(fmt.Errorf("outboxredis: XADD %q: connection refused by the server: %s", stream, msg))
		case serverWide[code]:
			// The server refuses every write for now, whatever the
			// message: memory pressure, a restart reading its data, a
			// long script, a replica or a failover, too few replicas, a
			// failing snapshot. The route is down until a probe passes.
			return publisher.Unavailable(fmt.Errorf("outboxredis: XADD %q: the server refuses writes: %s", stream, msg))
		}
		// Every other reply is transient: TRYAGAIN, MOVED, ASK (a slot
		// being resharded) and replies this code does not know. A later
		// attempt can get past them.
		return fmt.Errorf("outboxredis: XADD %q: %s", stream, msg)
	}
	if errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("outboxredis: XADD %q: %w", stream, err)
	}
	if notConnected(err) {
		if ctx.Err() != nil {
			// The publish was cancelled while connecting: nothing went out.
			return fmt.Errorf("outboxredis: XADD %q: not sent: %w", stream, err)
		}
		return publisher.Unavailable(fmt.Errorf("outboxredis: XADD %q: cannot reach the server: %w", stream, err))
	}
	// The pipeline may have reached the server: a timeout or a connection
	// lost while waiting for replies.
	return publisher.Unknown(fmt.Errorf("outboxredis: XADD %q: no reply, the entry may have been written: %w", stream, err))
}

// notConnected reports whether err means no connection could be had, so
// nothing was sent: a failed dial (refused, timeout, DNS), a TLS handshake
// that failed on either side ("remote error" is the server's TLS alert,
// e.g. a client certificate it wants), or no pooled connection free in
// time.
func notConnected(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && (op.Op == "dial" || op.Op == "remote error") {
		return true
	}
	var (
		verr  *tls.CertificateVerificationError
		alert tls.AlertError
		rec   tls.RecordHeaderError
		ua    x509.UnknownAuthorityError
		hn    x509.HostnameError
		ci    x509.CertificateInvalidError
	)
	return errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrPoolExhausted) ||
		errors.As(err, &verr) || errors.As(err, &alert) || errors.As(err, &rec) ||
		errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci)
}

// oneLine keeps a server message to one bounded line.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
