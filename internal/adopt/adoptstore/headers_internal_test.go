package adoptstore

import (
	"testing"

	"github.com/txoutbox/outbox/internal/adopt"
)

// TestAdoptedHeaderValuesNull: a headers column holding JSON null (what
// PHP's json_encode(null) writes) beside header columns is no headers of
// its own, not a failed read.
func TestAdoptedHeaderValuesNull(t *testing.T) {
	a := &Store{p: &adopt.Profile{HeaderCol: map[string]string{"tag": "tag"}}}
	tag := "gold"
	for _, raw := range []string{"null", "{}", ""} {
		if got := a.headerValues(&raw, []*string{&tag}); got != `{"tag":"gold"}` {
			t.Errorf("headers %q with tag column: %q, want {\"tag\":\"gold\"}", raw, got)
		}
	}
	raw := `{"a":"b"}`
	if got := a.headerValues(&raw, []*string{nil}); got != `{"a":"b"}` {
		t.Errorf("headers %q without a tag: %q", raw, got)
	}
}
