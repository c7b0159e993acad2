package outboxce_test

import (
	"fmt"
	"slices"
	"time"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// The Kafka headers of a message published with
// ?format=cloudevents&ce_source=/orders.
func ExampleFormat_Headers() {
	f, _ := outboxce.Parse("cloudevents", "/orders")
	env := &publisher.Envelope{
		ID: "0190e6b4-8f3a-7c1e-9a4b-3f2d1c0b9a87", Topic: "order.created", Key: "order-42",
		Payload: []byte(`{"id":42}`), CreatedAt: time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC),
		Headers: map[string]string{
			publisher.HeaderTopic: "order.created", publisher.HeaderBusinessKey: "order-42",
			publisher.HeaderContentType: "application/json", "x-tenant": "acme",
		},
	}
	h, _ := f.Headers(outboxce.Kafka, env)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range h {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Printf("%s: %s\n", k, h[k])
	}
	// Output:
	// ce_id: 0190e6b4-8f3a-7c1e-9a4b-3f2d1c0b9a87
	// ce_partitionkey: order-42
	// ce_source: /orders
	// ce_specversion: 1.0
	// ce_subject: order-42
	// ce_time: 2026-12-01T09:30:00Z
	// ce_type: order.created
	// content-type: application/json
	// x-tenant: acme
}
