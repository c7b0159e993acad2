package outbox

import (
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/relay"
)

// TestDefaultsAreTheEngines: the defaults documented here, with their
// values for go doc, are the ones the engine fills in.
func TestDefaultsAreTheEngines(t *testing.T) {
	for _, c := range []struct {
		name      string
		api, used time.Duration
	}{
		{"DefaultBatchSize", DefaultBatchSize, relay.DefaultBatchSize},
		{"DefaultMinBatchSize", DefaultMinBatchSize, relay.DefaultMinBatchSize},
		{"DefaultMinPollInterval", DefaultMinPollInterval, relay.DefaultMinPollInterval},
		{"DefaultMaxPollInterval", DefaultMaxPollInterval, relay.DefaultMaxPollInterval},
		{"DefaultProbeInterval", DefaultProbeInterval, relay.DefaultProbeInterval},
		{"DefaultPublishTimeout", DefaultPublishTimeout, relay.DefaultPublishTimeout},
		{"DefaultShutdownTimeout", DefaultShutdownTimeout, relay.DefaultShutdownTimeout},
		{"DefaultWorkers", DefaultWorkers, relay.DefaultWorkers},
		{"DefaultMetricsInterval", DefaultMetricsInterval, relay.DefaultMetricsInterval},
		{"DefaultLeaseTTL", DefaultLeaseTTL, relay.DefaultLeaseTTL},
		{"DefaultNoRouteGrace", DefaultNoRouteGrace, relay.DefaultNoRouteGrace},
		{"DefaultMaxPayloadBytes", DefaultMaxPayloadBytes, relay.DefaultMaxPayloadBytes},
		{"DefaultRetentionSent", DefaultRetentionSent, relay.DefaultRetentionSent},
		{"DefaultRetentionDead", DefaultRetentionDead, relay.DefaultRetentionDead},
		{"DefaultRetentionBatchSize", DefaultRetentionBatchSize, relay.DefaultRetentionBatchSize},
		{"DefaultRetentionInterval", DefaultRetentionInterval, relay.DefaultRetentionInterval},
		{"DefaultAlertInterval", DefaultAlertInterval, relay.DefaultAlertInterval},
		{"DefaultRouteDownAlert", DefaultRouteDownAlert, relay.DefaultRouteDownAlert},
		{"DefaultRetryCap", DefaultRetryCap, relay.DefaultRetryCap},
		{"DefaultProbeMin", DefaultProbeMin, relay.DefaultProbeMin},
		{"DefaultProbeMax", DefaultProbeMax, relay.DefaultProbeMax},
		{"DefaultMaxRetryAfter", DefaultMaxRetryAfter, relay.DefaultMaxRetryAfter},
	} {
		if c.api != c.used {
			t.Errorf("%s is %d here, %d in the engine", c.name, c.api, c.used)
		}
	}
}
