package store

// ReadSQL is the relay's read statement for d, for tests that EXPLAIN it.
func ReadSQL(d Dialect) string { return build(d).read }

// BeforeRemove runs fn between each of st's retention windows and its
// delete.
func BeforeRemove(st *Store, fn func()) { beforeRemove.Store(st, fn) }
