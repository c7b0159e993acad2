package outboxamqp

import (
	"errors"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/txoutbox/outbox/publisher"
)

func TestParseMaxSize(t *testing.T) {
	for reason, want := range map[string]int64{
		"PRECONDITION_FAILED - message size 134217729 is larger than configured max size 134217728": 134217728,
		"PRECONDITION_FAILED - inequivalent arg 'durable'":                                          0,
		"": 0,
	} {
		if got := parseMaxSize(reason); got != want {
			t.Errorf("parseMaxSize(%q) = %d, want %d", reason, got, want)
		}
	}
}

// TestLost: how a message of a channel that closed is classified, by the
// close reason and by whether it was sent.
func TestLost(t *testing.T) {
	big := &flight{size: 200}
	small := &flight{size: 10}
	for _, tc := range []struct {
		name  string
		err   *amqp.Error
		f     *flight
		sent  bool
		want  publisher.ErrorClass
		is    error
		words string
	}{
		{"clean close, sent", nil, small, true, publisher.ClassUnknown, nil, "connection closed"},
		{"clean close, unsent", nil, nil, false, publisher.ClassTransient, nil, "not sent"},
		{"missing exchange", &amqp.Error{Code: amqp.NotFound, Reason: "NOT_FOUND - no exchange 'x' in vhost '/'", Server: true, Recover: true}, small, true, publisher.ClassPermanent, ErrNoExchange, `exchange "ex" does not exist in vhost "/"`},
		{"missing exchange, unsent", &amqp.Error{Code: amqp.NotFound, Reason: "NOT_FOUND - no exchange 'x' in vhost '/'", Server: true, Recover: true}, nil, false, publisher.ClassPermanent, ErrNoExchange, "does not exist"},
		{"too large", &amqp.Error{Code: amqp.PreconditionFailed, Reason: "PRECONDITION_FAILED - message size 200 is larger than configured max size 100", Server: true, Recover: true}, big, true, publisher.ClassPermanent, ErrTooLarge, "max_message_size is 100"},
		{"small one on a channel killed by a large one", &amqp.Error{Code: amqp.PreconditionFailed, Reason: "PRECONDITION_FAILED - message size 200 is larger than configured max size 100", Server: true, Recover: true}, small, true, publisher.ClassUnknown, nil, "channel closed"},
		{"network, sent", &amqp.Error{Code: amqp.FrameError, Reason: "EOF"}, small, true, publisher.ClassUnknown, nil, "connection lost"},
		{"network, unsent", &amqp.Error{Code: amqp.FrameError, Reason: "EOF"}, nil, false, publisher.ClassUnavailable, nil, "connection lost"},
		{"broker shutdown, unsent", &amqp.Error{Code: amqp.ConnectionForced, Reason: "CONNECTION_FORCED - shutdown", Server: true}, nil, false, publisher.ClassUnavailable, nil, "closed by the broker"},
		{"access refused, unsent", &amqp.Error{Code: amqp.AccessRefused, Reason: "ACCESS_REFUSED - write access", Server: true, Recover: true}, nil, false, publisher.ClassTransient, nil, "ACCESS_REFUSED"},
	} {
		s := &session{exchange: "ex", vhost: "/", closeErr: tc.err}
		if tc.err != nil && tc.err.Code == amqp.PreconditionFailed {
			s.oversize = parseMaxSize(tc.err.Reason)
		}
		err := s.lost(tc.f, tc.sent)
		if got := publisher.Classify(err); got != tc.want {
			t.Errorf("%s: %q is %v, want %v", tc.name, err, got, tc.want)
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%s: %q is not %v", tc.name, err, tc.is)
		}
		if !strings.Contains(err.Error(), tc.words) {
			t.Errorf("%s: %q does not say %q", tc.name, err, tc.words)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"amqp://guest:guest@h:5672/v": "amqp://guest:xxxxx@h:5672/v",
		"amqp://h/":                   "amqp://h/",
		"amqp://u:p@h/?x=1#f":         "amqp://u:xxxxx@h/",
		"amqp://u:p a@h/":             "amqp://xxxxx@h/",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSenderSelectedHeadersNotSent: CC and BCC from message data would
// route the message to further routing keys; they never reach the wire.
func TestSenderSelectedHeadersNotSent(t *testing.T) {
	p := &Publisher{}
	m := p.message(&publisher.Envelope{ID: "id", Headers: map[string]string{"CC": "admin.cmd", "bcc": "x", "x-tenant": "t"}})
	if _, ok := m.Headers["CC"]; ok {
		t.Error("CC was sent")
	}
	if _, ok := m.Headers["bcc"]; ok {
		t.Error("bcc was sent")
	}
	if m.Headers["x-tenant"] != "t" {
		t.Errorf("x-tenant = %v", m.Headers["x-tenant"])
	}
}
