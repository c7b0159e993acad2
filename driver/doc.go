// Package driver is the contract between the outbox and a Go database
// driver. The outbox ships two implementations — outboxpgx (pgx v5) and
// outboxsql (database/sql: PostgreSQL, MySQL/MariaDB, SQLite) — and anyone
// may write another (over GORM, ent, bun or a driver of their own) by
// implementing [Driver] for the transaction type their users hold. This
// package holds only what a driver author needs; applications use the
// outbox package and a driver package.
//
// # What a driver does
//
// The outbox writes all of its SQL itself, per [Dialect]; a driver only
// runs it. It provides:
//
//   - an [Executor] over its pool, for the relay's and the operators'
//     statements, each outside any transaction;
//   - an [Executor] over the caller's own transaction, which is how
//     Producer.Enqueue writes inside it ([Driver.UnwrapExecutor]);
//   - a new transaction of the caller's type ([Driver.InTx]), used by the
//     inbox;
//   - a dedicated connection ([Session]) for migrations, which hold
//     session-level locks;
//   - an identity ([Driver.Identity]): producers and relays whose drivers
//     report equal identities wake each other in process;
//   - optionally, signalling between processes ([Listener]), found by type
//     assertion on the Driver;
//   - optionally, transaction values that are batches sent later
//     ([Queuer]), found by type assertion on the Executor of one: Enqueue
//     queues its inserts there and shares the caller's round trip;
//   - optionally, a feed of the database's commits ([ChangeFeed]), found
//     by type assertion on the Driver: an idle relay looks for new rows
//     when a producer committed instead of probing the table.
//
// # Errors
//
// A driver translates its database's errors at its edge: an error that is
// a unique-key violation must satisfy errors.Is(err, [ErrUniqueViolation]),
// one that is a deadlock or serialization failure errors.Is(err,
// [ErrDeadlock]). Decide by the error's type and code (SQLSTATE, error
// number, result code), never by its text; [Mark] keeps the original error
// reachable with errors.As and its message unchanged. The outbox turns a
// unique violation into a duplicate-message-id error and retries short
// bookkeeping statements that lost a deadlock.
//
// # Testing a driver
//
// Package drivertest is the conformance suite: a driver that passes
// drivertest.Run works with every part of the outbox.
package driver
