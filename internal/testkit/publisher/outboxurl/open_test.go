package outboxurl_test

import (
	"strings"
	"testing"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxurl"
)

// openAs opens raw, closes the publisher at the end of the test, and fails
// the test unless Open succeeds with a T.
func openAs[T publisher.Publisher](t *testing.T, raw string, opts *outboxurl.Options) T {
	t.Helper()
	p, err := outboxurl.Open(raw, opts)
	if err != nil {
		t.Fatalf("Open(%q): %v", outboxurl.Redact(raw), err)
	}
	t.Cleanup(func() { _ = p.Close() })
	tp, ok := p.(T)
	if !ok {
		var want T
		t.Fatalf("Open(%q) = %T, want %T", outboxurl.Redact(raw), p, want)
	}
	return tp
}

// openFails checks that Open(raw, opts) fails without a publisher, and
// that its error is one line holding each of want and none of secrets.
func openFails(t *testing.T, raw string, opts *outboxurl.Options, want []string, secrets ...string) {
	t.Helper()
	p, err := outboxurl.Open(raw, opts)
	if err == nil {
		_ = p.Close()
		t.Errorf("Open(%q) = %T, want an error with %q", raw, p, want)
		return
	}
	if p != nil {
		t.Errorf("Open(%q) returned a publisher %#v with its error", raw, p)
	}
	msg := err.Error()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("Open(%q) error %q does not contain %q", raw, msg, w)
		}
	}
	if strings.ContainsAny(msg, "\r\n") {
		t.Errorf("Open(%q) error is not one line: %q", raw, msg)
	}
	for _, s := range secrets {
		if strings.Contains(msg, s) {
			t.Errorf("Open(%q) error %q leaks %q", raw, msg, s)
		}
	}
}
