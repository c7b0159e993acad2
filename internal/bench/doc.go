// Package bench is the `outbox bench` command: the project's benchmark,
// run against a real database and destination.
//
// # Workloads
//
//   - produce: producer transaction throughput. N clients each loop over
//     one transaction that inserts a business row, alone and with an
//     outbox message (with and without the producer's coalesced wake-up,
//     and, on PostgreSQL, with the per-row pg_notify anti-pattern).
//   - drain: pre-fills the outbox and times relays delivering all of it.
//   - steady: open-loop producers at a fixed rate with relays running;
//     latency is measured from each message's intended send time, so a
//     stalled producer shows up as latency (no coordinated omission);
//     --consume adds a NATS consumer and the latency to its receipt.
//   - ceiling: reads and settles ready rows through the store without
//     publishing: the database's upper bound for a relay.
//   - publish: no database; workers publish messages shaped like drain's
//     straight to the destination's Publisher, in the relay's rounds and
//     per-key waves, each waiting for its confirmations: the
//     destination's upper bound for a relay. A drain can then be compared
//     with the lesser of ceiling and publish.
//
// # Working in a shared database
//
// The bench migrates the schema, then tags everything it writes with a
// topic prefix unique to the run (outbox-bench.<run>.) and a business table
// named after the run, and removes both when it ends, interrupted or not.
// Because its relays would take over partitions (and so other messages),
// it refuses to run relays while another relay is live on the database or
// while messages that are not its own are pending; any that arrive during
// the run are held back (left pending), never published or killed.
package bench
