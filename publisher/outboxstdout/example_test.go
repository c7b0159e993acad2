package outboxstdout_test

import (
	"context"
	"fmt"
	"os"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxstdout"
)

func Example() {
	pub := outboxstdout.New(os.Stdout)
	errs := pub.Publish(context.Background(), []*publisher.Envelope{
		{
			ID:          "0190d2c4-7b1e-7cc0-9d4e-5a4f1b2c3d4e",
			Topic:       "order.created",
			Key:         "order-42",
			Destination: "order.created",
			Payload:     []byte(`{"order_id": 42}`),
			Headers:     map[string]string{"content-type": "application/json", "outbox-topic": "order.created", "outbox-business-key": "order-42"},
			Attempt:     1,
		},
		{
			ID:          "0190d2c4-7b1e-7cc0-9d4e-5a4f1b2c3d4f",
			Topic:       "audit.note",
			Destination: "audit.note",
			Payload:     []byte("plain text"),
			Headers:     map[string]string{"content-type": "text/plain", "outbox-topic": "audit.note"},
			Attempt:     2,
		},
	})
	fmt.Println(errs)
	// Output:
	// {"message_id":"0190d2c4-7b1e-7cc0-9d4e-5a4f1b2c3d4e","topic":"order.created","destination":"order.created","business_key":"order-42","headers":{"content-type":"application/json","outbox-business-key":"order-42","outbox-topic":"order.created"},"payload":{"order_id":42},"attempt":1}
	// {"message_id":"0190d2c4-7b1e-7cc0-9d4e-5a4f1b2c3d4f","topic":"audit.note","destination":"audit.note","headers":{"content-type":"text/plain","outbox-topic":"audit.note"},"payload":"plain text","attempt":2}
	// [<nil> <nil>]
}
