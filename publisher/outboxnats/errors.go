package outboxnats

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/txoutbox/outbox/publisher"
)

// MaxSubjectLen is the longest subject published. NATS refuses protocol
// lines over its max_control_line (4 KiB by default) by closing the
// connection, so a runaway subject from row data is refused here instead.
const MaxSubjectLen = 1024

// validSubject says why s cannot be a JetStream publish subject.
func validSubject(s string) error {
	bad := func(why string) error {
		return fmt.Errorf("outboxnats: invalid subject %q: %s", s, why)
	}
	switch {
	case s == "":
		return errors.New("outboxnats: empty subject")
	case len(s) > MaxSubjectLen:
		return fmt.Errorf("outboxnats: invalid subject %.40q…: longer than %d bytes", s, MaxSubjectLen)
	case s[0] == '$':
		return bad("$-prefixed subjects are the server's own ($JS, $SYS, $KV…)")
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return bad("blanks and control characters are not allowed")
		}
	}
	for tok := range strings.SplitSeq(s, ".") {
		switch tok {
		case "":
			return bad("empty token")
		case "*", ">":
			return bad("wildcards cannot be published to")
		}
	}
	return nil
}

// validHeader says why a header cannot travel as a NATS header.
func validHeader(k, v string) error {
	if k == "" {
		return errors.New("empty header name")
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return fmt.Errorf("header name %q cannot be carried by NATS", k)
		}
	}
	if len(k) >= 5 && strings.EqualFold(k[:5], "nats-") {
		return fmt.Errorf("header %q is reserved: Nats-* headers steer JetStream and must not come from message data", k)
	}
	if strings.ContainsAny(v, "\r\n") {
		return fmt.Errorf("header %q: the value has a line break, which NATS headers cannot carry", k)
	}
	return nil
}

func statusText(s nats.Status) string {
	return strings.ToLower(s.String())
}

// notConnected is the error of a message not sent because the connection
// is down.
func (p *Publisher) notConnected(subject string) error {
	msg := fmt.Sprintf("outboxnats: subject %q: not sent: not connected to NATS (connection %s)", subject, statusText(p.nc.Status()))
	if err := p.nc.LastError(); err != nil {
		msg += ": " + oneLine(err.Error())
	}
	return publisher.Unavailable(errors.New(msg))
}

// sendError classifies a failure to hand a message to the client: nothing
// reached the server.
func (p *Publisher) sendError(env *publisher.Envelope, msg *nats.Msg, err error) error {
	subject := env.Destination
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		return publisher.Permanent(fmt.Errorf("outboxnats: subject %q: message too large: %d bytes of payload and headers, the server's max_payload is %d", subject, msg.Size()-len(msg.Subject), p.nc.MaxPayload()))
	case errors.Is(err, nats.ErrBadSubject):
		return publisher.Permanent(fmt.Errorf("outboxnats: invalid subject %q: %w", subject, err))
	case errors.Is(err, nats.ErrBadHeaderMsg), errors.Is(err, nats.ErrHeadersNotSupported):
		return publisher.Permanent(fmt.Errorf("outboxnats: subject %q: %w", subject, err))
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrNoServers),
		errors.Is(err, nats.ErrReconnectBufExceeded), errors.Is(err, nats.ErrConnectionDraining),
		errors.Is(err, nats.ErrInvalidConnection), !p.nc.IsConnected():
		return publisher.Unavailable(fmt.Errorf("outboxnats: subject %q: not sent: %w", subject, err))
	}
	// Nothing was sent: a plain error, retried with backoff.
	return fmt.Errorf("outboxnats: subject %q: not sent: %v", subject, err)
}

// ackError classifies the error a PubAckFuture reported: the message
// reached the client, maybe the server.
func (p *Publisher) ackError(ctx context.Context, env *publisher.Envelope, err error, lookups map[string]error) error {
	subject := env.Destination
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return p.noResponders(ctx, subject, lookups)
	case errors.As(err, &apiErr):
		if apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum {
			return publisher.Permanent(fmt.Errorf("outboxnats: subject %q: message too large for the stream (max_msg_size): %s", subject, apiErr.Description))
		}
		// Limits reached with discard=new, storage full, a stream
		// leader in flux: the stream refused this message, try later.
		return fmt.Errorf("outboxnats: subject %q: JetStream refused the message: %s (err_code %d)", subject, apiErr.Description, apiErr.ErrorCode)
	case errors.Is(err, nats.ErrDisconnected):
		return publisher.Unknown(fmt.Errorf("outboxnats: subject %q: connection lost while the PubAck was awaited: %w", subject, err))
	}
	// A timeout, a closed publisher context, an unreadable ack: the
	// message may be stored.
	return publisher.Unknown(fmt.Errorf("outboxnats: subject %q: no PubAck: %w", subject, err))
}

// noResponders explains a "no responders" answer: nothing on the server
// listens on the subject. If no stream captures it, that is permanent;
// if one does, its leader did not answer (an election) and a retry may
// succeed. Answers are kept for the rest of the batch.
func (p *Publisher) noResponders(ctx context.Context, subject string, lookups map[string]error) error {
	if e, ok := lookups[subject]; ok {
		return e
	}
	lctx, cancel := context.WithTimeout(ctx, p.lookupTimeout)
	defer cancel()
	name, err := p.js.StreamNameBySubject(lctx, subject)
	var e error
	switch {
	case err == nil:
		e = fmt.Errorf("outboxnats: subject %q: stream %s did not answer (no responders)", subject, name)
	case errors.Is(err, jetstream.ErrStreamNotFound):
		e = publisher.Permanent(fmt.Errorf("outboxnats: no JetStream stream for subject %q", subject))
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		e = publisher.Permanent(fmt.Errorf("outboxnats: no JetStream stream for subject %q: %v", subject, err))
	default:
		// Not cached: the next message may find the server answering.
		return fmt.Errorf("outboxnats: subject %q: no responders, and looking up its stream failed: %v", subject, err)
	}
	lookups[subject] = e
	return e
}

// oneLine keeps an error message on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
