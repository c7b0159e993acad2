package outboxsql

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCacheSize is how many prepared statements a Driver keeps: more than
// the distinct statements a relay runs on an idle database, so that they
// are never evicted by each other.
const stmtCacheSize = 64

// stmtCache holds statements prepared on one *sql.DB, keyed by their SQL
// text, for the Driver's pool executor only. On SQLite, parsing and
// planning a statement costs more than running the relay's statements on
// an idle database; a prepared one is parsed once per connection.
//
// It is never used inside a transaction or on a session's connection: a
// *sql.Stmt runs on whatever connection of the pool is free, each
// statement in its own implicit transaction, and modernc.org/sqlite resets
// a prepared statement when its rows are closed, so the statement holds
// no read transaction (or WAL snapshot) between uses.
type stmtCache struct {
	db *sql.DB

	mu     sync.Mutex
	stmts  map[string]*cachedStmt
	tick   uint64
	closed bool
}

type cachedStmt struct {
	s    *sql.Stmt
	used uint64 // tick of the last use, for eviction
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, stmts: make(map[string]*cachedStmt)}
}

// get returns the statement prepared for query, preparing it on a miss.
// It returns nil when the cache is closed or the statement cannot be
// prepared: the caller then runs query unprepared, which reports the same
// error a prepared run would.
func (c *stmtCache) get(ctx context.Context, query string) *sql.Stmt {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.tick++
	if e, ok := c.stmts[query]; ok {
		e.used = c.tick
		c.mu.Unlock()
		return e.s
	}
	c.mu.Unlock()

	// Prepared outside the lock: preparing waits for a free connection,
	// and hits must not wait behind it.
	s, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		_ = s.Close()
		return nil
	}
	c.tick++
	if e, ok := c.stmts[query]; ok {
		// Prepared meanwhile by another caller: keep one.
		_ = s.Close()
		e.used = c.tick
		return e.s
	}
	if len(c.stmts) >= stmtCacheSize {
		c.evictLocked()
	}
	c.stmts[query] = &cachedStmt{s: s, used: c.tick}
	return s
}

// evictLocked closes the least recently used statement. A statement whose
// rows are still open is finalized by database/sql once they close.
func (c *stmtCache) evictLocked() {
	var oldest string
	var at uint64
	first := true
	for q, e := range c.stmts {
		if first || e.used < at {
			oldest, at, first = q, e.used, false
		}
	}
	if !first {
		_ = c.stmts[oldest].s.Close()
		delete(c.stmts, oldest)
	}
}

// len is how many statements are prepared.
func (c *stmtCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.stmts)
}

// close closes every statement; later gets return nil.
func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var first error
	for q, e := range c.stmts {
		if err := e.s.Close(); err != nil && first == nil {
			first = err
		}
		delete(c.stmts, q)
	}
	return first
}
