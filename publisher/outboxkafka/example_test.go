package outboxkafka_test

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxkafka"
)

// Wrap a client you configured. An in-process kfake cluster stands in for
// Kafka here; the topic exists, as the operator would have created it.
func ExampleNew() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "order.created"))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()

	client, err := kgo.NewClient(
		kgo.SeedBrokers(cluster.ListenAddrs()...),
		kgo.UnknownTopicRetries(1), // a missing topic fails fast
	) // acks=all and the idempotent producer are kgo's defaults
	if err != nil {
		panic(err)
	}
	defer client.Close()
	pub, err := outboxkafka.New(client, nil)
	if err != nil {
		panic(err)
	}
	defer pub.Close()

	errs := pub.Publish(context.Background(), []*publisher.Envelope{{
		ID: "0190d2c4-7b1e-7cc0-9d4e-5a4f1b2c3d4e", Topic: "order.created", Destination: "order.created",
		Key: "order-42", Payload: []byte(`{"order_id":42}`),
		Headers: map[string]string{publisher.HeaderTopic: "order.created", publisher.HeaderBusinessKey: "order-42", publisher.HeaderContentType: "application/json"},
	}, {
		ID: "0190d2c4-7b1e-7cc0-9d4e-5a4f1b2c3d4f", Topic: "order.created", Destination: "no-such-topic",
		Payload: []byte(`{}`),
	}})
	fmt.Println("order-42:", errs[0])
	fmt.Println("missing topic:", publisher.Classify(errs[1]))
	// Output:
	// order-42: <nil>
	// missing topic: permanent
}
