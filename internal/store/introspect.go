package store

import (
	"context"
	"reflect"
)

// This file exposes the statements of each dialect, and one hook, to the
// tests that EXPLAIN them or interleave with retention (internal/testkit/store):
// they live in a module of their own, so they cannot reach unexported names.

// SettleSQL is the relay's settle as one statement for d, for tests that
// EXPLAIN it; on PostgreSQL it is the body of outbox_settle.
func SettleSQL(d Dialect) string { return dialectOf(d).statements().settleInline }

// MarkInflightSQL is the relay's in-flight mark statement for d.
func MarkInflightSQL(d Dialect) string { return dialectOf(d).statements().markInflight }

// SettleCallSQL is the settle statement the relay runs for d (on
// PostgreSQL, the call of outbox_settle).
func SettleCallSQL(d Dialect) string { return dialectOf(d).statements().settle }

// ReadSQL is the relay's read as one statement for d, for tests that
// EXPLAIN it; on PostgreSQL it is the body of outbox_read, to be run with
// ReadSettings.
func ReadSQL(d Dialect) string { return dialectOf(d).statements().readInline }

// ReadSettings are the settings outbox_read runs its body with
// (005_read_function_cached.sql), as SET LOCAL statements: with
// plan_cache_mode, an EXPLAIN with arguments shows the generic plan the
// function keeps.
var ReadSettings = []string{"SET LOCAL enable_seqscan = off", "SET LOCAL enable_bitmapscan = off", "SET LOCAL jit = off", "SET LOCAL plan_cache_mode = force_generic_plan"}

// BeforeRemove runs fn between each of st's retention windows and its
// delete.
func BeforeRemove(st *Store, fn func()) { beforeRemove.Store(st, fn) }

// RetentionSQL is d's retention statements by name, for tests that
// EXPLAIN them.
func RetentionSQL(d Dialect) map[string]string {
	s := dialectOf(d).retention()
	out := map[string]string{"window": s.window, "remove": s.remove, "move": s.move, "lock": s.lock, "archive": s.archive, "purge": s.purge}
	for k, v := range out {
		if v == "" {
			delete(out, k)
		}
	}
	return out
}

// OldestDueSQL is d's sample of the oldest due message's age, for tests
// that EXPLAIN it.
func OldestDueSQL(d Dialect) string { return dialectOf(d).statements().oldestDue }

// MySQLCap is the statement the store sends for sql on MySQL under ctx.
func MySQLCap(ctx context.Context, sql string) string { return mysqlCap(ctx, sql) }

// MySQLStatements are MySQL's fixed and retention statements by name.
func MySQLStatements() map[string]string {
	out := map[string]string{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		for i := range v.NumField() {
			switch f := v.Field(i); {
			case f.Kind() == reflect.Struct:
				walk(f) // a group of statements
			case f.Kind() == reflect.String && f.String() != "":
				out[v.Type().Field(i).Name] = f.String()
			}
		}
	}
	for _, s := range []any{mysql{}.statements(), mysql{}.retention()} {
		walk(reflect.ValueOf(s))
	}
	return out
}
