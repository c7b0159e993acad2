package outboxmqtt_test

import (
	"context"
	"fmt"
	"net/url"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/publisher/outboxmqtt"
)

// A relay route that publishes order events to an MQTT broker: consumers
// subscribe to "order/+" and dedupe on the message-id user property.
func ExampleDial() {
	pub, err := outboxmqtt.Dial(&outboxmqtt.DialConfig{
		Server:   "mqtts://broker.example.com:8883",
		Username: "relay",
		Password: "from-a-secret-store",
		ClientID: "outbox-relay-1",
	})
	if err != nil {
		panic(err)
	}
	defer pub.Close()
	_ = outbox.RelayConfig{Routes: []outbox.Route{{Pattern: "order.*", Publisher: pub}}}
}

// An application that already runs an autopaho connection manager shares
// it with the relay; the application disconnects it.
func ExampleNew() {
	server, _ := url.Parse("mqtt://127.0.0.1:1883")
	cm, err := autopaho.NewConnection(context.Background(), autopaho.ClientConfig{
		ServerUrls:   []*url.URL{server},
		KeepAlive:    30,
		ClientConfig: paho.ClientConfig{ClientID: "app-1"},
	})
	if err != nil {
		panic(err)
	}
	defer cm.Disconnect(context.Background())
	pub, err := outboxmqtt.New(cm, &outboxmqtt.Config{MaxInFlight: 20})
	if err != nil {
		panic(err)
	}
	defer pub.Close()
}

func ExampleTopic() {
	fmt.Println(outboxmqtt.Topic("order.created"))
	fmt.Println(outboxmqtt.Topic("tenant-7.invoice.paid"))
	// Output:
	// order/created
	// tenant-7/invoice/paid
}
