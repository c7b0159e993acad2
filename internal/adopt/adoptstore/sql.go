package adoptstore

import (
	"strconv"
	"strings"

	"github.com/txoutbox/outbox/internal/adopt"
	"github.com/txoutbox/outbox/internal/store"
)

// The SQL of an adopted table: what differs between the databases, the
// predicates of the table's states in its own vocabulary, and the fixed
// statements of a profile.

// adoptDialect is what differs between the databases for adopted tables.
type adoptDialect struct {
	d store.Dialect
	// ident quotes a (validated) identifier.
	ident func(string) string
	// now is the current time for the table's own time columns;
	// later(x) is now plus x microseconds.
	now   string
	later func(x string) string
	// epoch renders a time column as float seconds since the epoch;
	// nowEpoch is the clock the same way.
	epoch    func(col string) string
	nowEpoch string
	// text casts an expression to text.
	text func(expr string) string
	// greatest is the two-argument maximum function.
	greatest string
	// leaseNow and leaseLater are now and now + x µs for the lease table,
	// one of the outbox's own (store.Dialect's Now and Later).
	leaseNow   string
	leaseLater func(x string) string
	// insertIgnore is the lease row insert that keeps an existing row.
	insertIgnore string
}

func adoptDialectOf(d store.Dialect) adoptDialect {
	switch d {
	case store.MySQL:
		return adoptDialect{
			d:        d,
			ident:    func(s string) string { return "`" + s + "`" },
			now:      "NOW(6)",
			later:    func(x string) string { return "NOW(6) + INTERVAL (" + x + ") MICROSECOND" },
			epoch:    func(c string) string { return "UNIX_TIMESTAMP(" + c + ")" },
			nowEpoch: "UNIX_TIMESTAMP(NOW(6))",
			text:     func(e string) string { return "CAST(" + e + " AS CHAR)" },
			greatest: "GREATEST",
			leaseNow: d.Now(), leaseLater: d.Later,
			insertIgnore: "INSERT IGNORE INTO outbox_adopted_leases (table_name, partition_no) VALUES (?, 0)",
		}
	case store.SQLite:
		return adoptDialect{
			d:     d,
			ident: quote,
			now:   "strftime('%Y-%m-%d %H:%M:%S', 'now')",
			later: func(x string) string {
				return "strftime('%Y-%m-%d %H:%M:%S', 'now', '+' || ((" + x + ") / 1000000.0) || ' seconds')"
			},
			epoch:    func(c string) string { return "((julianday(" + c + ") - 2440587.5) * 86400.0)" },
			nowEpoch: "((julianday('now') - 2440587.5) * 86400.0)",
			text:     func(e string) string { return "CAST(" + e + " AS TEXT)" },
			greatest: "max",
			leaseNow: d.Now(), leaseLater: d.Later,
			insertIgnore: "INSERT INTO outbox_adopted_leases (table_name, partition_no) VALUES (?, 0) ON CONFLICT DO NOTHING",
		}
	default:
		return adoptDialect{
			d:        d,
			ident:    quote,
			now:      "now()",
			later:    func(x string) string { return "now() + (" + x + ")::bigint * interval '1 microsecond'" },
			epoch:    func(c string) string { return "extract(epoch from " + c + ")::float8" },
			nowEpoch: "extract(epoch from now())::float8",
			text:     func(e string) string { return "(" + e + ")::text" },
			greatest: "GREATEST",
			leaseNow: d.Now(), leaseLater: d.Later,
			insertIgnore: "INSERT INTO outbox_adopted_leases (table_name, partition_no) VALUES (?, 0) ON CONFLICT DO NOTHING",
		}
	}
}

// octets is the length in bytes of the text expression x.
func (ad adoptDialect) octets(x string) string {
	if ad.d == store.MySQL {
		return "LENGTH(" + x + ")"
	}
	return "octet_length(" + x + ")"
}

// bind turns the "?" placeholders of q into the dialect's.
func (ad adoptDialect) bind(q string) string { return store.Bind(ad.d, q) }

// lit is a status value as a SQL literal (values are validated: letters,
// digits and _ . : - only). A quoted literal compares with and assigns to
// integer columns too.
func lit(v string) string { return "'" + v + "'" }

// col is column c of the alias m, quoted.
func (a *Store) col(m, c string) string { return m + "." + a.ad.ident(c) }

// attempts, maxAttempts: the attempt columns as numbers (NULL is 0; a
// NULL max is the default).
func (a *Store) attempts(m string) string { return "COALESCE(" + a.col(m, a.p.Attempts) + ", 0)" }

func (a *Store) maxAttempts(m string) string {
	if a.p.MaxAttempts == "" {
		return a.p.MaxAttemptsLiteral()
	}
	return "COALESCE(" + a.col(m, a.p.MaxAttempts) + ", " + strconv.Itoa(adopt.DefaultMaxAttempts) + ")"
}

// ready is the predicate of rows still to deliver (due or not).
func (a *Store) ready(m string) string {
	st := a.col(m, a.p.Status)
	retryable := "(" + st + " = " + lit(a.p.Failed) + " AND " + a.attempts(m) + " < " + a.maxAttempts(m) + ")"
	if a.p.Pending == a.p.Failed {
		return retryable
	}
	return "(" + st + " = " + lit(a.p.Pending) + " OR " + retryable + ")"
}

// dead is the predicate of the table's dead rows.
func (a *Store) dead(m string) string {
	st := a.col(m, a.p.Status)
	exhausted := "(" + st + " = " + lit(a.p.Failed) + " AND " + a.attempts(m) + " >= " + a.maxAttempts(m) + ")"
	if a.p.DeadIsFailed() {
		return exhausted
	}
	return "(" + st + " = " + lit(a.p.Dead) + " OR " + exhausted + ")"
}

// due is the predicate of rows whose next attempt has come.
func (a *Store) due(m, now string) string {
	n := a.col(m, a.p.NextAttempt)
	return "(" + n + " IS NULL OR " + n + " <= " + now + ")"
}

// unsettled is the guard of every write back: the row is still in a
// state the relay delivers from.
func (a *Store) unsettled(m string) string {
	st := a.col(m, a.p.Status)
	return "(" + st + " IN (" + lit(a.p.Pending) + ", " + lit(a.p.Failed) + "))"
}

// fence is the lease check of every write back (arguments: table, owner).
func (a *Store) fence() string {
	return "EXISTS (SELECT 1 FROM outbox_adopted_leases AS l WHERE l.table_name = ? AND l.partition_no = 0 AND l.owner = ? AND l.expires_at > " + a.ad.leaseNow + ")"
}

func (a *Store) table() string { return a.ad.ident(a.p.Table) }

// statements builds the profile's statements from its validated
// identifiers and status values.
func (a *Store) statements() adoptedStatements {
	var s adoptedStatements
	s.read = a.readStatement()
	a.countStatements(&s)
	a.settleStatements(&s)
	a.leaseStatements(&s)
	return s
}

// readStatement is the read of ready rows: oldest first, a key's later
// rows held back while an earlier one waits.
func (a *Store) readStatement() string {
	p, ad := a.p, a.ad
	text := a.text
	// The read measures the payload and leaves it out past the base
	// store's bound (the first argument; see store.Store.WithPayloadLimit),
	// so a row of any size costs the relay no memory.
	cols := a.messageCols()
	payload := text(p.Payload)
	bound := "?"
	if ad.d == store.Postgres {
		bound = "CAST(? AS bigint)" // the bound may pass an int4
	}
	cols[4] = "CASE WHEN " + ad.octets(payload) + " <= " + bound + " THEN " + payload + " END"
	cols = append(cols, a.attempts("m"), a.maxAttempts("m"))
	if p.CreatedAt != "" {
		cols = append(cols, ad.epoch(a.col("m", p.CreatedAt)))
	} else {
		cols = append(cols, "NULL")
	}
	cols = append(cols, ad.octets(payload))
	now, with := ad.now, ""
	if ad.d == store.SQLite {
		// SQLite may read its clock again between rows; the read takes
		// it once, so a key's waiting row cannot be overtaken.
		with, now = "WITH clock AS MATERIALIZED (SELECT "+ad.now+" AS now) ", "(SELECT now FROM clock)"
	}
	order := ""
	if p.Key != "" {
		k := a.col("m", p.Key)
		order = "\n  AND (" + k + " IS NULL OR NOT EXISTS (SELECT 1 FROM " + a.table() + " AS e WHERE " + a.col("e", p.Key) + " = " + k +
			" AND " + a.col("e", p.ID) + " < " + a.col("m", p.ID) + " AND " + a.ready("e") + " AND NOT " + a.due("e", now) + "))"
	}
	return ad.bind(with + "SELECT " + strings.Join(cols, ", ") + "\nFROM " + a.table() + " AS m\nWHERE " + a.ready("m") + " AND " + a.due("m", now) + order +
		"\nORDER BY " + a.col("m", p.ID) + " LIMIT ?")
}

// countStatements are the gauges' and the counts by status.
func (a *Store) countStatements(s *adoptedStatements) {
	p, ad := a.p, a.ad
	oldest := "NULL"
	if p.CreatedAt != "" {
		oldest = "(SELECT " + ad.nowEpoch + " - " + ad.epoch(a.col("m", p.CreatedAt)) + " FROM " + a.table() + " AS m WHERE " + a.ready("m") +
			" ORDER BY " + a.col("m", p.ID) + " LIMIT 1)"
	}
	s.gauges = "SELECT (SELECT count(*) FROM " + a.table() + " AS m WHERE " + a.ready("m") + "), (SELECT count(*) FROM " + a.table() + " AS m WHERE " + a.dead("m") +
		"), " + oldest + ", " + ad.nowEpoch
	s.countStatus = "SELECT " + a.text(p.Status) + ", count(*) FROM " + a.table() + " AS m GROUP BY " + a.col("m", p.Status)
}

// settleStatements are the outcomes' updates: retry, postpone, dead (with
// and without the attempt counted) and sent.
func (a *Store) settleStatements(s *adoptedStatements) {
	p, ad := a.p, a.ad
	set := func(parts ...string) string {
		if p.UpdatedAt != "" {
			parts = append(parts, ad.ident(p.UpdatedAt)+" = "+ad.now)
		}
		return strings.Join(parts, ", ")
	}
	errSet := func() []string {
		if p.Error == "" {
			return nil
		}
		return []string{ad.ident(p.Error) + " = ?"}
	}
	att := ad.ident(p.Attempts)
	where := " WHERE " + a.col("m", p.ID) + " = ? AND " + a.unsettled("m") + " AND " + a.fence()
	upd := "UPDATE " + a.table() + " AS m SET "
	// Arguments: [error,] delay µs, id, table, owner.
	s.retry = ad.bind(upd + set(append(append([]string{ad.ident(p.Status) + " = " + lit(p.Failed), att + " = " + a.attempts("m") + " + 1"}, errSet()...),
		ad.ident(p.NextAttempt)+" = "+ad.later("?"))...) + where)
	s.postpone = ad.bind(upd + set(append(errSet(), ad.ident(p.NextAttempt)+" = "+ad.later("?"))...) + where)
	// Arguments: [error,] id, table, owner. The next-attempt column is
	// the application's and keeps when the last attempt fell due; the
	// updated-at column, where the profile names one, is the time of
	// death.
	for i, inc := range []string{"1", "0"} {
		var parts []string
		if p.DeadIsFailed() {
			parts = []string{ad.ident(p.Status) + " = " + lit(p.Failed), att + " = " + ad.greatest + "(" + a.attempts("m") + " + " + inc + ", " + a.maxAttempts("m") + ")"}
		} else {
			parts = []string{ad.ident(p.Status) + " = " + lit(p.Dead), att + " = " + a.attempts("m") + " + " + inc}
		}
		q := ad.bind(upd + set(append(parts, errSet()...)...) + where)
		if i == 0 {
			s.dead = q
		} else {
			s.deadUncounted = q
		}
	}
	s.sentPrefix = upd + set(ad.ident(p.Status)+" = "+lit(p.Sent)) + " WHERE " + a.col("m", p.ID) + " IN ("
	s.sentSuffix = ") AND " + a.unsettled("m") + " AND " + a.fence()
}

// leaseStatements are the table's one lease, in outbox_adopted_leases.
func (a *Store) leaseStatements(s *adoptedStatements) {
	ad := a.ad
	s.ensureLease = ad.bind(ad.insertIgnore)
	// leaseExists fails when migration 9 has not made the lease table.
	s.leaseExists = "SELECT count(*) FROM outbox_adopted_leases WHERE partition_no < 0"
	s.acquire = ad.bind(`UPDATE outbox_adopted_leases SET
    prev_owner = owner,
    inflight_max_id = CASE WHEN owner IS NULL THEN 0 ELSE inflight_max_id END,
    owner = ?,
    expires_at = ` + ad.leaseLater("?") + `
WHERE table_name = ? AND partition_no = 0 AND (owner IS NULL OR owner = ? OR expires_at <= ` + ad.leaseNow + `)`)
	s.held = ad.bind(`SELECT partition_no, inflight_max_id, coalesce(prev_owner, '') FROM outbox_adopted_leases
WHERE table_name = ? AND owner = ? AND expires_at > ` + ad.leaseNow)
	s.renew = ad.bind(`UPDATE outbox_adopted_leases SET expires_at = ` + ad.leaseLater("?") + `
WHERE table_name = ? AND owner = ? AND expires_at > ` + ad.leaseNow)
	s.release = ad.bind(`UPDATE outbox_adopted_leases SET owner = NULL, prev_owner = NULL, inflight_max_id = 0, expires_at = ` + ad.leaseNow + `
WHERE table_name = ? AND owner = ?`)
	s.markInflight = ad.bind(`UPDATE outbox_adopted_leases SET inflight_max_id = ?
WHERE table_name = ? AND partition_no = 0 AND owner = ? AND inflight_max_id <> ?`)
}

// quote quotes an identifier as PostgreSQL and SQLite do.
func quote(s string) string { return "\"" + s + "\"" }

// placeholdersQ is n "?" separated by commas, for an IN list.
func placeholdersQ(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }
