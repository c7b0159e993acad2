package outboxkinesis_test

import (
	"fmt"
	"strings"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxkinesis"
)

// The record data of a message on the plain wire: the JSON framing that
// consumers in any language read.
func ExampleData() {
	env := &publisher.Envelope{
		ID:          "0192f0c4-3a6e-7cc4-9a3b-1f2e3d4c5b6b",
		Topic:       "order.created",
		Key:         "order-42",
		Destination: "orders",
		Payload:     []byte(`{"order_id":42}`),
		Headers: map[string]string{
			publisher.HeaderTopic:       "order.created",
			publisher.HeaderBusinessKey: "order-42",
			publisher.HeaderContentType: "application/json",
		},
	}
	data, _ := outboxkinesis.Data(env, nil)
	fmt.Println(string(data))
	fmt.Println(outboxkinesis.PartitionKey(env.Key, env.ID))

	env.Payload = []byte("hello")
	env.Headers[publisher.HeaderContentType] = "text/plain"
	data, _ = outboxkinesis.Data(env, nil)
	fmt.Println(string(data[strings.Index(string(data), `"payload`):]))
	// Output:
	// {"message_id":"0192f0c4-3a6e-7cc4-9a3b-1f2e3d4c5b6b","topic":"order.created","business_key":"order-42","headers":{"content-type":"application/json","outbox-business-key":"order-42","outbox-topic":"order.created"},"payload":{"order_id":42}}
	// order-42
	// "payload_base64":"aGVsbG8="}
}
