// Package bench is the `outbox bench` command: the project's benchmark,
// run against a real database and destination.
//
// # Workloads
//
//   - produce: producer transaction throughput. N clients each loop over
//     one transaction that inserts a business row, alone and with an
//     outbox message (with and without the producer's coalesced wake-up,
//     and, on PostgreSQL, with the per-row pg_notify anti-pattern); when
//     named, with the payload sealed (outbox+seal) or kept in a
//     claim-check directory (outbox+claim).
//   - drain: pre-fills the outbox and times relays delivering all of it.
//   - steady: open-loop producers at a fixed rate with relays running;
//     latency is measured from each message's intended send time, so a
//     stalled producer shows up as latency (no coordinated omission);
//     --consume adds a NATS consumer and the latency to its receipt.
//   - sustain: the highest producer rate the relay keeps up with. Each
//     trial is a steady run at one rate, in a database made for it on
//     --db's server (a new SQLite file beside --db's) and dropped after,
//     so that the dead rows of one trial do not slow the next; its
//     producers stop when the window ends. A rate is sustained when the
//     backlog (committed, not yet confirmed) grows by at most 100 msg/s
//     over the window — the slope of its samples, every 100 ms — and the
//     producers committed at least 99 % of the rate; when they did not
//     while the relay kept up, the producers, not the relay, are the
//     bound, and the report says so. The search doubles the rate from
//     --start while trials are sustained (up to --max-rate), halves it
//     while they are not, then bisects between the highest sustained rate
//     and the lowest failed one until their gap is under --precision of
//     the former. The report gives every trial's backlog growth and
//     verdict, and the steady figures of the trial at the sustained rate.
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
// sustain leaves --db's database alone: each of its trials works in a
// database of its own on the same server, created for it and dropped after
// it, interrupted or not.
package bench
