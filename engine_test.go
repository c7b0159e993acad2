package outbox_test

import (
	"errors"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/relay"
)

// TestEngineSpeaksTheAPI: the names the engine puts on the wire and the
// error classes it acts on are the ones the API documents.
func TestEngineSpeaksTheAPI(t *testing.T) {
	for api, engine := range map[string]string{
		outbox.HeaderTopic:                 relay.HeaderTopic,
		outbox.HeaderBusinessKey:           relay.HeaderBusinessKey,
		outbox.HeaderContentType:           relay.HeaderContentType,
		outbox.HeaderTransferEncode:        relay.HeaderTransferEncode,
		outbox.HeaderTraceParent:           relay.HeaderTraceParent,
		outbox.HeaderTraceState:            relay.HeaderTraceState,
		outbox.DefaultContentType:          relay.DefaultContentType,
		outbox.AlertDeadLetters:            relay.AlertDeadLetters,
		outbox.AlertOldestPending:          relay.AlertOldestPending,
		outbox.AlertOldestPendingRecovered: relay.AlertOldestPendingRecovered,
	} {
		if api != engine {
			t.Errorf("API %q, engine %q", api, engine)
		}
	}
	base := errors.New("x")
	for _, c := range []struct {
		err  error
		want outbox.ErrorClass
		name string
	}{
		{outbox.Permanent(base), outbox.ClassPermanent, "permanent"},
		{outbox.Unavailable(base), outbox.ClassUnavailable, "unavailable"},
		{outbox.Unknown(base), outbox.ClassUnknown, "unknown"},
		{outbox.RetryAfter(base, time.Second), outbox.ClassTransient, "transient"},
		{base, outbox.ClassTransient, "transient"},
	} {
		got, _ := relay.ClassOf(c.err)
		if outbox.ErrorClass(got) != c.want || outbox.Classify(c.err) != c.want || c.want.String() != c.name || !errors.Is(c.err, base) {
			t.Errorf("%v: engine class %v, API %v, want %v (%s)", c.err, got, outbox.Classify(c.err), c.want, c.name)
		}
	}
	if outbox.RetryAfterOf(outbox.RetryAfter(base, time.Minute)) != time.Minute {
		t.Error("RetryAfterOf lost the wait")
	}
	if outbox.Permanent(nil) != nil || outbox.Unknown(nil) != nil {
		t.Error("a nil error marked is not nil")
	}
}
