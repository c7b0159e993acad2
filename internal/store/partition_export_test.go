package store

// SettleSQL is the relay's settle statement for d, for tests that EXPLAIN it.
func SettleSQL(d Dialect) string { return build(d).settle }
