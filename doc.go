// Package outbox is a transactional outbox ("local message table") for Go.
//
// An application writes its business rows and the messages that describe
// them in ONE database transaction with [Producer.Enqueue]; a [Relay]
// delivers committed messages to a broker or an HTTP endpoint, at least
// once, in order per business key, retrying with backoff until the
// destination confirms and dead-lettering what can never go.
//
// # Producing
//
// Build a [Producer] over a driver for your database and call Enqueue with
// your own transaction:
//
//	drv, err := outboxpgx.New(pool, nil)
//	if err != nil {
//		return err
//	}
//	producer, err := outbox.NewProducer(drv, nil)
//	if err != nil {
//		return err
//	}
//	tx, err := pool.Begin(ctx)
//	if err != nil {
//		return err
//	}
//	defer tx.Rollback(ctx) // a no-op once committed
//	if _, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", 42); err != nil {
//		return err
//	}
//	_, err = producer.Enqueue(ctx, tx, outbox.Message{
//		Topic:   "order.created",
//		Key:     "order-42",
//		Payload: []byte(`{"order_id":42}`),
//	})
//	if err != nil {
//		return err
//	}
//	return tx.Commit(ctx) // the message is delivered once this commits
//
// Enqueue validates every message before it writes anything, so a rejected
// message leaves the caller's transaction usable.
//
// Producers in any language may insert into the outbox_messages table with
// plain SQL; the database fills in the message id, status, times and
// partition.
//
// The tables come from [Migrate] (or `outbox migrate`); [SchemaSQL] prints
// them for your own migration tool.
//
// # Drivers
//
// A [Driver] runs the outbox's SQL through the database library the
// application already uses: outboxpgx for a pgx pool, outboxsql for a
// *sql.DB (PostgreSQL, MySQL/MariaDB, SQLite). Producers and relays over the
// same pool wake each other in process. Package driver is the contract for
// writing another, and driver/drivertest its conformance suite.
//
// # Relaying
//
// A [Relay] reads ready messages of the partitions it owns, publishes them
// through the [Route] whose pattern matches the topic, and settles each
// batch in one statement: sent, retry later, or dead. Many relays may run
// over one database; they split the partitions between them through a lease
// table, so messages with the same business key are published in id order
// and no message is published twice in the absence of crashes. A relay that
// dies loses its leases when they expire and the survivors take over.
//
// A message is marked sent only after its destination confirmed it. A crash
// between publish and settle re-delivers that batch; consumers dedupe by
// message id.
//
// # Errors
//
// Publishers (package publisher holds their contract) classify failures
// with [publisher.Permanent], [publisher.RetryAfter], [publisher.Unavailable]
// and [publisher.Unknown]; anything else is a transient failure that is
// retried after a wait from the route's [RetryPolicy] (by default about a second,
// growing to hours) until the message's max attempts are used up.
package outbox
