package outboxkafka_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxkafka"
)

// Wrap a client you configured: the topics exist, as the operator
// created them. A message whose topic does not exist comes back as a
// permanent failure (dead letter); one the brokers could not confirm in
// time, as unknown (sent again).
func ExampleNew() {
	client, err := kgo.NewClient(
		kgo.SeedBrokers("kafka-1:9092", "kafka-2:9092"),
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
	}})
	if err := errs[0]; err != nil {
		fmt.Println("order-42:", publisher.Classify(err), err) // permanent, unknown, …
	}
}

// fetchToken stands for your token source, such as a golang.org/x/oauth2
// TokenSource (which caches and refreshes): ts.Token() then AccessToken.
func fetchToken(context.Context) (string, error) {
	if t := os.Getenv("KAFKA_TOKEN"); t != "" {
		return t, nil
	}
	return "", errors.New("no token yet")
}

// Sign in with OAUTHBEARER (Confluent Cloud, Azure Event Hubs) from a
// token source of your own: the client calls the function at every
// connection and re-authentication. A failure wrapped in ErrNoCredentials
// takes the relay's route down instead of charging the message.
func ExampleDial_oauthbearer() {
	pub, err := outboxkafka.Dial([]string{"pkc-abc12.eu-west-1.aws.confluent.cloud:9092"}, nil,
		kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}),
		kgo.SASL(oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
			token, err := fetchToken(ctx)
			if err != nil {
				return oauth.Auth{}, fmt.Errorf("kafka token: %w: %v", outboxkafka.ErrNoCredentials, err)
			}
			return oauth.Auth{Token: token, Extensions: map[string]string{
				"logicalCluster": "lkc-xyz98", "identityPoolId": "pool-Ab1C", // Confluent Cloud's
			}}, nil
		})),
	)
	if err != nil {
		panic(err)
	}
	defer pub.Close()
}
