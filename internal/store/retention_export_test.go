package store

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
