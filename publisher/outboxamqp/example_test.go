package outboxamqp_test

import (
	"fmt"

	"github.com/txoutbox/outbox/publisher/outboxamqp"
)

// New does not connect; the first Publish does. Errors never show the
// password.
func ExampleNew() {
	pub, err := outboxamqp.New("amqp://relay:s3cret@rabbit.internal:5672/shop", &outboxamqp.Config{Exchange: "events"})
	if err != nil {
		panic(err)
	}
	defer pub.Close()
	fmt.Println(pub.Exchange())

	_, err = outboxamqp.New("amqp://relay:s3cret@rabbit.internal/shop/eu", nil)
	fmt.Println(err)
	// Output:
	// events
	// outboxamqp: amqp://relay:xxxxx@rabbit.internal/shop/eu: the vhost must be one path segment (write / as %2F)
}
