package outboxpubsub_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"cloud.google.com/go/pubsub/v2"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxpubsub"
)

// A publisher for the topic "orders" and a consumer of an ordered
// subscription, here against an in-process Pub/Sub server. Against the
// service, make the client with pubsub.NewClientWithConfig(ctx, project,
// outboxpubsub.ClientConfig()) and no options: Application Default
// Credentials.
func Example() {
	srv := pstest.NewServerWithAddress("127.0.0.1:0")
	defer srv.Close()
	ctx := context.Background()
	client, err := pubsub.NewClientWithConfig(ctx, "my-project", outboxpubsub.ClientConfig(),
		option.WithEndpoint(srv.Addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	// The operator's resources: a topic and a subscription with ordering.
	if _, err := client.TopicAdminClient.CreateTopic(ctx, &pb.Topic{Name: "projects/my-project/topics/orders"}); err != nil {
		log.Fatal(err)
	}
	if _, err := client.SubscriptionAdminClient.CreateSubscription(ctx, &pb.Subscription{
		Name: "projects/my-project/subscriptions/billing", Topic: "projects/my-project/topics/orders", EnableMessageOrdering: true,
	}); err != nil {
		log.Fatal(err)
	}

	pub, err := outboxpubsub.New(client, &outboxpubsub.Config{Topic: "orders"})
	if err != nil {
		log.Fatal(err)
	}
	defer pub.Close()
	env := &publisher.Envelope{ID: "0190b7a4-6c1e-7c5e-9d43-5f2b8f0e8a11", Topic: "order.created", Key: "order-42",
		Payload: []byte(`{"total":12}`), Headers: map[string]string{publisher.HeaderTopic: "order.created",
			publisher.HeaderBusinessKey: "order-42", publisher.HeaderContentType: "application/json"}}
	fmt.Println("published:", pub.Publish(ctx, []*publisher.Envelope{env})[0])

	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = outboxpubsub.Consume(cctx, client.Subscriber("billing"), func(_ context.Context, m *inbox.Message) error {
		fmt.Println(m.ID, m.Topic, m.Key, string(m.Payload))
		cancel()
		return nil
	}, nil)
	// Output:
	// published: <nil>
	// 0190b7a4-6c1e-7c5e-9d43-5f2b8f0e8a11 order.created order-42 {"total":12}
}
