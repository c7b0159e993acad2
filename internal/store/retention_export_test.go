package store

// ReadSQL is the relay's read statement for d, for tests that EXPLAIN it.
func ReadSQL(d Dialect) string { return build(d).read }

// BeforeRemove runs fn between each of st's retention windows and its
// delete.
func BeforeRemove(st *Store, fn func()) { beforeRemove.Store(st, fn) }

// RetentionSQL is d's retention statements by name, for tests that
// EXPLAIN them.
func RetentionSQL(d Dialect) map[string]string {
	s := retention[d]
	out := map[string]string{"window": s.window, "remove": s.remove, "move": s.move, "lock": s.lock, "archive": s.archive, "purge": s.purge}
	for k, v := range out {
		if v == "" {
			delete(out, k)
		}
	}
	return out
}
