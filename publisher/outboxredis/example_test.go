package outboxredis_test

import (
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/publisher/outboxredis"
)

// The publisher wraps the client the application already configured;
// messages of topics under "order." are appended to the stream of their
// topic, which the operator created (XGROUP CREATE order.created
// billing $ MKSTREAM).
func ExampleNew() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	pub, err := outboxredis.New(client, &outboxredis.Config{
		MaxLen:      1_000_000, // keep about the last million entries per stream
		CloseClient: true,      // the relay owns the client
	})
	if err != nil {
		log.Fatal(err)
	}
	routes := []outbox.Route{{Pattern: "order.*", Publisher: pub}}
	_ = routes // outbox.NewRelay(driver, &outbox.RelayConfig{Routes: routes})
}
