package brokertest

import "github.com/txoutbox/outbox/internal/testkit/testdb"

// The local brokers the tests use, each overridable by its environment
// variable.
var (
	// AMQPURL is RabbitMQ: OUTBOX_TEST_AMQP.
	AMQPURL = testdb.Env("OUTBOX_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672/")
	// NATSURL is NATS with JetStream: OUTBOX_TEST_NATS.
	NATSURL = testdb.Env("OUTBOX_TEST_NATS", "nats://127.0.0.1:4222")
	// RedisAddr is Redis: OUTBOX_TEST_REDIS.
	RedisAddr = testdb.Env("OUTBOX_TEST_REDIS", "127.0.0.1:6379")
	// MQTTAddr is Mosquitto: OUTBOX_TEST_MQTT.
	MQTTAddr = testdb.Env("OUTBOX_TEST_MQTT", "127.0.0.1:1883")
)
