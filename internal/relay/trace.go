package relay

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/txoutbox/outbox/internal/redact"
	"github.com/txoutbox/outbox/publisher"
)

// tracerName is the instrumentation scope of the relay's spans.
const tracerName = "github.com/txoutbox/outbox"

// newTracer is the relay's tracer: from tp, else the global provider
// (which follows a provider set after the relay was built).
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// startSend starts the span of one publish attempt of it: a producer span,
// the child of the trace context the message was enqueued with. When the
// span is recorded, its context replaces traceparent and tracestate on the
// wire, so the consumer's spans hang under this attempt; otherwise the
// producer's context travels unchanged.
func (r *Relay) startSend(rs *routeState, it *item) trace.Span {
	ctx := context.Background()
	h := it.env.Headers
	if _, ok := h[publisher.HeaderTraceParent]; ok {
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier(h))
	}
	_, span := r.tracer.Start(ctx, "send", trace.WithSpanKind(trace.SpanKindProducer))
	if !span.IsRecording() {
		return span
	}
	span.SetName("send " + it.env.Destination)
	span.SetAttributes(
		attribute.String("messaging.operation.type", "send"),
		attribute.String("messaging.operation.name", "send"),
		attribute.String("messaging.destination.name", it.env.Destination),
		attribute.String("messaging.message.id", it.env.ID),
		attribute.Int("messaging.message.body.size", len(it.env.Payload)),
		attribute.String("outbox.topic", it.env.Topic),
		attribute.String("outbox.route", rs.name),
		attribute.Int("outbox.attempt", it.env.Attempt),
	)
	delete(h, publisher.HeaderTraceState)
	propagation.TraceContext{}.Inject(trace.ContextWithSpan(context.Background(), span), propagation.MapCarrier(h))
	return span
}

// endSend ends a publish attempt's span with its result.
func endSend(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, redact.Text(oneLine(err.Error())))
		cls, _ := classOf(err)
		span.SetAttributes(attribute.String("outbox.error_class", cls.String()))
	}
	span.End()
}
