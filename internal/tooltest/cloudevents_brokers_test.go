package tooltest

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/protocol/kafka_sarama/v2"
	natsce "github.com/cloudevents/sdk-go/protocol/nats_jetstream/v2"
	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/testkit/brokertest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxamqp"
	"github.com/txoutbox/outbox/publisher/outboxkafka"
	"github.com/txoutbox/outbox/publisher/outboxmqtt"
	"github.com/txoutbox/outbox/publisher/outboxnats"
)

// TestCloudEventsKafka: a kafka route with format=cloudevents produces
// records that the SDK's Kafka binding reads as the event (ce_ headers,
// content-type, partitionkey and the record key the business key), and
// outboxkafka.Decode reads as the plain wire's message.
func TestCloudEventsKafka(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addrs := c.ListenAddrs()
	p := openCE(t, "kafka://"+strings.Join(addrs, ",")+"?format=cloudevents&ce_source=%2Forders", nil)
	env := ceEnvelope("orders", map[string]string{"x-tenant": "acme"})
	publishCE(t, p, env)

	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var r *kgo.Record
	for r == nil && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(x *kgo.Record) { r = x })
	}
	if r == nil {
		t.Fatal("no record within 20s")
	}
	headers := map[string][]byte{}
	for _, h := range r.Headers {
		headers[strings.ToLower(h.Key)] = h.Value
	}
	if string(r.Key) != env.Key || string(headers["ce_partitionkey"]) != env.Key || headers[outboxkafka.HeaderMessageID] != nil {
		t.Errorf("record key %q, ce_partitionkey %q, message-id %q", r.Key, headers["ce_partitionkey"], headers[outboxkafka.HeaderMessageID])
	}
	ev := sdkEvent(t, kafka_sarama.NewMessage(r.Value, string(headers["content-type"]), headers), env)
	if pk, _ := ev.Extensions()["partitionkey"].(string); pk != env.Key {
		t.Errorf("partitionkey extension %v", ev.Extensions()["partitionkey"])
	}
	m, err := outboxkafka.Decode(r)
	checkDecoded(t, m, err, env)
}

// TestCloudEventsNATS: a nats route with format=cloudevents publishes
// JetStream messages that the SDK's NATS JetStream binding reads as the
// event (percent-encoded ce- headers), and outboxnats.Decode reads as the
// plain wire's message; Nats-Msg-Id stays for JetStream's dedupe.
func TestCloudEventsNATS(t *testing.T) {
	nc, js := brokertest.JetStream(t, brokertest.NATSURL)
	_ = nc
	stream := testdb.RandomName("cetest_")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{stream + ".>"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })
	p := openCE(t, brokertest.NATSURL+"?format=cloudevents&ce_source=%2Forders", nil)
	env := ceEnvelope(stream+".orders", map[string]string{"x-tenant": "acme"})
	publishCE(t, p, env)

	oc, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := oc.Next(jetstream.FetchMaxWait(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Headers().Get(jetstream.MsgIDHeader) != env.ID || msg.Headers().Get("ce-id") != env.ID {
		t.Errorf("headers %v: want Nats-Msg-Id and ce-id the message id", msg.Headers())
	}
	sdkEvent(t, natsce.NewMessage(&nats.Msg{Subject: msg.Subject(), Header: msg.Headers(), Data: msg.Data()}), env)
	m, err := outboxnats.Decode(msg)
	checkDecoded(t, m, err, env)
}

// TestCloudEventsAMQP: an amqp route with format=cloudevents publishes
// to RabbitMQ with the attributes as cloudEvents: headers and the
// content_type property; the SDK's attribute mapping reads the event, and
// outboxamqp.Decode the plain wire's message.
func TestCloudEventsAMQP(t *testing.T) {
	rabbit := testdb.Env("OUTBOX_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672/")
	conn, err := amqp.Dial(rabbit)
	if err != nil {
		testdb.Unavailable(t, "RabbitMQ", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	dest := testdb.RandomName("cetest.")
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err == nil {
		err = ch.QueueBind(q.Name, dest, outboxamqp.DefaultExchange, false, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	deliveries, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := openCE(t, rabbit+"?format=cloudevents&ce_source=%2Forders", nil)
	env := ceEnvelope(dest, map[string]string{"x-tenant": "acme"})
	publishCE(t, p, env)
	var d amqp.Delivery
	select {
	case d = <-deliveries:
	case <-time.After(20 * time.Second):
		t.Fatal("no delivery within 20s")
	}
	props := map[string]string{}
	for k, v := range d.Headers {
		if s, ok := v.(string); ok {
			props[k] = s
		}
	}
	if d.ContentType != "application/json" || props["cloudEvents:id"] != env.ID || d.MessageId != env.ID {
		t.Errorf("content_type %q, headers %v, message_id %q", d.ContentType, d.Headers, d.MessageId)
	}
	sdkEvent(t, &genericMessage{prefix: "cloudEvents:", props: props, contentType: d.ContentType, body: d.Body}, env)
	m, err := outboxamqp.Decode(d)
	checkDecoded(t, m, err, env)
}

// TestCloudEventsMQTT: an mqtt route with format=cloudevents publishes
// MQTT 5 messages with the attributes as user properties of their own
// names and datacontenttype as the Content Type property; the SDK's
// attribute mapping reads the event, and outboxmqtt.Decode the plain
// wire's message. A producer header that is no attribute name makes the
// message permanent: the binding would read it as an invalid attribute.
func TestCloudEventsMQTT(t *testing.T) {
	addr := testdb.Env("OUTBOX_TEST_MQTT", "127.0.0.1:1883")
	topic := testdb.RandomName("cetest/")
	got := make(chan *paho.Publish, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cm, err := autopaho.NewConnection(ctx, autopaho.ClientConfig{
		ServerUrls:                    []*url.URL{{Scheme: "mqtt", Host: addr}},
		CleanStartOnInitialConnection: true,
		KeepAlive:                     30,
		ConnectTimeout:                5 * time.Second,
		ClientConfig: paho.ClientConfig{
			ClientID: testdb.RandomName("cetest-"),
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(r paho.PublishReceived) (bool, error) {
				got <- r.Packet
				return true, nil
			}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cm.Disconnect(context.Background()) })
	if err := cm.AwaitConnection(ctx); err != nil {
		testdb.Unavailable(t, "Mosquitto", err)
	}
	if _, err := cm.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	p := openCE(t, "mqtt://"+addr+"?format=cloudevents&ce_source=%2Forders", nil)
	dest := strings.ReplaceAll(topic, "/", ".")
	env := ceEnvelope(dest, map[string]string{"tenant": "acme"})
	publishCE(t, p, env)
	var pub *paho.Publish
	select {
	case pub = <-got:
	case <-ctx.Done():
		t.Fatal("no PUBLISH within 30s")
	}
	props := map[string]string{}
	for _, u := range pub.Properties.User {
		props[u.Key] = u.Value
	}
	if pub.Properties.ContentType != "application/json" || props["id"] != env.ID || props[outboxmqtt.PropertyMessageID] != "" {
		t.Errorf("content type %q, user properties %v", pub.Properties.ContentType, props)
	}
	ev := sdkEvent(t, &genericMessage{props: props, contentType: pub.Properties.ContentType, body: pub.Payload}, env)
	if ev.Extensions()["tenant"] != "acme" {
		t.Errorf("tenant extension %v", ev.Extensions()["tenant"])
	}
	m, err := outboxmqtt.Decode(pub)
	checkDecoded(t, m, err, env)

	bad := ceEnvelope(dest, map[string]string{"x-tenant": "acme"})
	errs := p.Publish(ctx, []*outbox.Envelope{bad})
	if publisher.Classify(errs[0]) != publisher.ClassPermanent || !strings.Contains(errs[0].Error(), "x-tenant") {
		t.Errorf("a header that is no attribute name: %v, want a permanent error naming it", errs[0])
	}
}
