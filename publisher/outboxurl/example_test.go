package outboxurl_test

import (
	"context"
	"fmt"
	"os"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxurl"
)

func ExampleOpen() {
	pub, err := outboxurl.Open("stdout://", &outboxurl.Options{Stdout: os.Stdout})
	if err != nil {
		panic(err)
	}
	defer pub.Close()
	pub.Publish(context.Background(), []*publisher.Envelope{{
		ID: "0190d2c4-7b1e-7cc0-9d4e-5a4f1b2c3d4e", Topic: "order.created", Destination: "order.created",
		Payload: []byte(`{"order_id":42}`), Attempt: 1,
	}})

	_, err = outboxurl.Open("ftp://files.example.com/drop", nil)
	fmt.Println(err)
	// Output:
	// {"message_id":"0190d2c4-7b1e-7cc0-9d4e-5a4f1b2c3d4e","topic":"order.created","destination":"order.created","headers":{},"payload":{"order_id":42},"attempt":1}
	// destination ftp://files.example.com/drop: unknown scheme "ftp" (supported: stdout, http, https, amqp, amqps, kafka, mqtt, mqtts, nats, redis, rediss)
}

func ExampleRedact() {
	fmt.Println(outboxurl.Redact("amqp://app:s3cret@rabbit:5672/prod?exchange=events"))
	fmt.Println(outboxurl.Redact("https://hooks.example.com/in?token=abc123&team=7"))
	// Output:
	// amqp://app:xxxxx@rabbit:5672/prod?exchange=events
	// https://hooks.example.com/in?token=xxxxx&team=7
}
