package outbox_test

import (
	"testing"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/relay"
)

// TestEngineSpeaksTheAPI: the alert kinds the engine raises are the ones
// the API documents.
func TestEngineSpeaksTheAPI(t *testing.T) {
	for api, engine := range map[string]string{
		outbox.AlertDeadLetters:            relay.AlertDeadLetters,
		outbox.AlertOldestPending:          relay.AlertOldestPending,
		outbox.AlertOldestPendingRecovered: relay.AlertOldestPendingRecovered,
	} {
		if api != engine {
			t.Errorf("API %q, engine %q", api, engine)
		}
	}
}
