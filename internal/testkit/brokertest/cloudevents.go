package brokertest

import (
	"strings"
	"testing"

	"github.com/txoutbox/outbox/publisher/outboxurl"
)

// CloudEvents returns newTarget's targets with their Publisher replaced by
// one opened from the target's URL with format=cloudevents, so that the
// consume suite checks that the package's Consume reads CloudEvents into
// the same messages as the plain wire.
func CloudEvents(newTarget func(t *testing.T) *Target) func(t *testing.T) *Target {
	return func(t *testing.T) *Target {
		tg := newTarget(t)
		sep := "?"
		if strings.Contains(tg.URL, "?") {
			sep = "&"
		}
		p, err := outboxurl.Open(tg.URL+sep+"format=cloudevents&ce_source=%2Fsuite", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		tg.Publisher = p
		return tg
	}
}
