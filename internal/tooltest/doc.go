// Package tooltest checks the files `outbox migrate sql --format` writes
// with the migration tools themselves (goose, golang-migrate, and atlas's
// checksum and statement splitter), against the real databases. It is a
// module of its own so that those tools never become dependencies of the
// outbox module.
package tooltest
