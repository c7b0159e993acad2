package store

// SettleSQL is the relay's settle as one statement for d, for tests that
// EXPLAIN it; on PostgreSQL it is the body of outbox_settle.
func SettleSQL(d Dialect) string { return dialectOf(d).statements().settleInline }

// MarkInflightSQL is the relay's in-flight mark statement for d.
func MarkInflightSQL(d Dialect) string { return dialectOf(d).statements().markInflight }

// SettleCallSQL is the settle statement the relay runs for d (on
// PostgreSQL, the call of outbox_settle).
func SettleCallSQL(d Dialect) string { return dialectOf(d).statements().settle }
