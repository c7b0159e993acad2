package publisher_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/txoutbox/outbox/publisher"
)

type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }
func (timeoutErr) Timeout() bool { return true }

func TestClassify(t *testing.T) {
	base := errors.New("x")
	for _, c := range []struct {
		err   error
		want  publisher.ErrorClass
		name  string
		after time.Duration
	}{
		{publisher.Permanent(base), publisher.ClassPermanent, "permanent", 0},
		{publisher.Unavailable(base), publisher.ClassUnavailable, "unavailable", 0},
		{publisher.Unknown(base), publisher.ClassUnknown, "unknown", 0},
		{publisher.RetryAfter(base, time.Second), publisher.ClassTransient, "transient", time.Second},
		{base, publisher.ClassTransient, "transient", 0},
		{context.DeadlineExceeded, publisher.ClassUnknown, "unknown", 0},
		{fmt.Errorf("send: %w", timeoutErr{}), publisher.ClassUnknown, "unknown", 0},
		// A mark survives wrapping, and the outermost mark wins.
		{fmt.Errorf("batch: %w", publisher.Permanent(base)), publisher.ClassPermanent, "permanent", 0},
		{publisher.Permanent(publisher.Unavailable(base)), publisher.ClassPermanent, "permanent", 0},
		{publisher.Unavailable(context.DeadlineExceeded), publisher.ClassUnavailable, "unavailable", 0},
	} {
		if got := publisher.Classify(c.err); got != c.want || got.String() != c.name {
			t.Errorf("Classify(%v) = %v, want %v (%s)", c.err, got, c.want, c.name)
		}
		if got := publisher.RetryAfterOf(c.err); got != c.after {
			t.Errorf("RetryAfterOf(%v) = %v, want %v", c.err, got, c.after)
		}
	}
	for _, err := range []error{publisher.Permanent(base), publisher.Unavailable(base), publisher.Unknown(base), publisher.RetryAfter(base, time.Minute)} {
		if !errors.Is(err, base) || err.Error() != "x" {
			t.Errorf("%v: the mark hides the error (Is %v, text %q)", err, errors.Is(err, base), err.Error())
		}
	}
	if publisher.Permanent(nil) != nil || publisher.Unknown(nil) != nil || publisher.Unavailable(nil) != nil || publisher.RetryAfter(nil, time.Second) != nil {
		t.Error("a nil error marked is not nil")
	}
}

func TestFuncPublishesEveryEnvelope(t *testing.T) {
	f := publisher.Func(func(_ context.Context, env *publisher.Envelope) error {
		if env.Key == "bad" {
			return publisher.Permanent(errors.New("bad " + env.ID))
		}
		return nil
	})
	batch := []*publisher.Envelope{{ID: "1"}, {ID: "2", Key: "bad"}, {ID: "3"}}
	errs := f.Publish(context.Background(), batch)
	if len(errs) != 3 || errs[0] != nil || errs[2] != nil || publisher.Classify(errs[1]) != publisher.ClassPermanent {
		t.Fatalf("results %v, want nil, permanent, nil", errs)
	}
	if errs := f.Publish(context.Background(), batch[:1]); len(errs) != 1 || errs[0] != nil {
		t.Fatalf("one envelope: %v", errs)
	}
}
