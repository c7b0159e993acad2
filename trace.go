package outbox

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
)

// traceHeaders returns the W3C trace context (traceparent, tracestate) of
// the span in ctx, or nil when there is none.
func traceHeaders(ctx context.Context) map[string]string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	if len(c) == 0 {
		return nil
	}
	return c
}
