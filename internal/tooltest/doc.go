// Package tooltest checks the outbox with the third-party tools teams use
// beside it, against the real databases: the files `outbox migrate sql
// --format` writes, applied by goose and golang-migrate and read by atlas's
// checksum and statement splitter; the ORM recipes of the README (GORM
// and ent through outboxsql.Adapt, sqlx, bun; ent's generated code is in
// ent/, made by go generate); and the CloudEvents wire, read back by the
// CloudEvents Go SDK. It is a module of its own so that none of those
// tools becomes a dependency of the outbox module.
package tooltest
