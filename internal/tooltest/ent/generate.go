// Package ent is the code ent generates for the ent recipe's tests, with
// the sql/execquery feature, which gives *Tx the ExecContext and
// QueryContext that outboxsql.Adapt runs the outbox's statements with.
package ent

//go:generate go run -mod=mod entgo.io/ent/cmd/ent generate --feature sql/execquery ./schema
