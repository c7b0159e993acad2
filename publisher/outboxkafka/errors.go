package outboxkafka

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txoutbox/outbox/publisher"
)

var (
	// ErrClosed is returned for every message published after Close.
	ErrClosed = errors.New("kafka: publisher is closed")

	// ErrNoCredentials marks the error of a SASL mechanism that could not
	// get its credentials when it had to authenticate: a token file that
	// is missing or empty, an AWS credential chain that found none. Like
	// credentials the broker rejects, it is the route's trouble, not the
	// message's: the publish is publisher.Unavailable and the relay takes
	// the route down without charging an attempt. A mechanism of your own
	// (kgo.SASL) gets the same treatment by wrapping it:
	// fmt.Errorf("…: %w", outboxkafka.ErrNoCredentials).
	ErrNoCredentials = errors.New("no SASL credentials")
)

// errRecreated marks a record failed because its topic was deleted and
// created again: the client keeps the old topic id until it forgets the
// topic, which Publish then makes it do.
var errRecreated = errors.New("the topic was deleted and created again; the next attempt uses the new one")

// classify turns a record's produce error into the class the relay acts
// on.
func (p *Publisher) classify(env *publisher.Envelope, err error) error {
	topic := env.Destination
	wrap := func(format string, args ...any) error {
		return fmt.Errorf("kafka: topic %s: "+format, append([]any{topic}, args...)...)
	}
	switch {
	case errors.Is(err, kgo.ErrClientClosed):
		if p.closed.Load() {
			return publisher.Unknown(wrap("publisher closed before the broker answered: %w", err))
		}
		return publisher.Unknown(wrap("%w before the broker answered", err))
	case errors.Is(err, kgo.ErrRecordTimeout), errors.Is(err, kgo.ErrRecordRetries):
		// The client gave up on the record. After a dial error no broker
		// could be reached at all; after a broker's error answer the
		// broker did not write it (an idempotent retry of a written batch
		// is answered as a duplicate, which is success). Otherwise the
		// outcome is not known.
		var ke *kerr.Error
		switch {
		case isDial(err) || refused(err):
			return publisher.Unavailable(wrap("no broker reachable: %w", err))
		case errors.As(err, &ke):
			return wrap("%w", err)
		}
		return publisher.Unknown(wrap("%w", err))
	case isDial(err) || refused(err):
		return publisher.Unavailable(wrap("no broker reachable: %w", err))
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return publisher.Permanent(wrap("topic does not exist (topics are created by the operator; the relay creates none): %w", err))
	case errors.Is(err, kerr.UnknownTopicID):
		return wrap("%w (%w)", errRecreated, err)
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		return publisher.Permanent(wrap("record of %d bytes is too large for the broker or the client (message.max.bytes, kgo.ProducerBatchMaxBytes): %w", recordSize(env), err))
	case errors.Is(err, kerr.InvalidTopicException):
		return publisher.Permanent(wrap("not a valid topic for the broker: %w", err))
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return publisher.Permanent(wrap("not authorized to write to the topic: %w", err))
	case errors.Is(err, kerr.InvalidRecord):
		return publisher.Permanent(wrap("the broker rejected the record: %w", err))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The client fails a record on its context only while it is
		// sure the broker does not have it: a plain retry.
		return wrap("not sent: %v", err)
	}
	return wrap("%w", err)
}

// isDial reports whether err is a failed connection attempt.
func isDial(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// refused reports whether err says that no connection to a broker can be
// had as things are: the connection was refused (or the host is unknown or
// unreachable), the broker's certificate is not trusted, the credentials
// were rejected, or the SASL mechanism had none (ErrNoCredentials). A
// dial that merely timed out says nothing of the kind: the network may
// just be slow.
func refused(err error) bool {
	var cv *tls.CertificateVerificationError
	var te interface{ Timeout() bool }
	switch {
	case errors.As(err, &cv), errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, ErrNoCredentials):
		return true
	case isDial(err):
		return !(errors.As(err, &te) && te.Timeout())
	}
	return false
}

// recordSize is the payload, key and header bytes of env's record.
func recordSize(env *publisher.Envelope) int {
	n := len(env.Payload) + len(env.Key) + len(HeaderMessageID) + len(env.ID)
	for k, v := range env.Headers {
		n += len(k) + len(v)
	}
	return n
}

// purgeRecreated makes the client forget topics that were recreated under
// a new id, so that the retry produces to the new topic.
func (p *Publisher) purgeRecreated(batch []*publisher.Envelope, errs []error) {
	var topics []string
	seen := map[string]bool{}
	for i, err := range errs {
		if err != nil && errors.Is(err, errRecreated) && !seen[batch[i].Destination] {
			seen[batch[i].Destination] = true
			topics = append(topics, batch[i].Destination)
		}
	}
	if len(topics) > 0 {
		p.client.PurgeTopicsFromProducing(topics...)
	}
}
