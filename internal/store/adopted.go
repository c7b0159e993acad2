package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/txoutbox/outbox/internal/adopt"
)

// Adopted is the relay's store over a local message table an application
// already writes (see package adopt): it reads and settles that table's
// rows in the table's own vocabulary, and keeps its leases in the relay's
// own outbox_adopted_leases (migration 9). The table is one partition,
// served by one relay at a time; the others stand by. Route health goes
// to outbox_route_health, as for outbox_messages.
type Adopted struct {
	base *Store
	p    *adopt.Profile
	ad   adoptDialect
	s    adoptedStatements
}

// adoptedStatements are the fixed statements of one profile, built once
// from its validated identifiers and status values.
type adoptedStatements struct {
	read, gauges, countStatus            string
	retry, postpone, dead, deadUncounted string
	sentPrefix, sentSuffix               string

	ensureLease, acquire, held, renew, release, markInflight, leaseExists string
}

// adoptedPartition is the one partition of an adopted table.
const adoptedPartition = 0

// NewAdopted returns the store over p's table, through base's database.
func NewAdopted(base *Store, p *adopt.Profile) (*Adopted, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	a := &Adopted{base: base, p: p, ad: adoptDialectOf(base.d)}
	a.s = a.statements()
	return a, nil
}

// Profile is the profile the store serves.
func (a *Adopted) Profile() *adopt.Profile { return a.p }

// Base is the store over the relay's own tables.
func (a *Adopted) Base() *Store { return a.base }

// adoptDialect is what differs between the databases for adopted tables.
type adoptDialect struct {
	d Dialect
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
	// leaseNow and leaseLater are now and now + x µs for the lease table.
	leaseNow   string
	leaseLater func(x string) string
	// insertIgnore is the lease row insert that keeps an existing row.
	insertIgnore string
}

func adoptDialectOf(d Dialect) adoptDialect {
	switch d {
	case MySQL:
		return adoptDialect{
			d:        d,
			ident:    func(s string) string { return "`" + s + "`" },
			now:      "NOW(6)",
			later:    func(x string) string { return "NOW(6) + INTERVAL (" + x + ") MICROSECOND" },
			epoch:    func(c string) string { return "UNIX_TIMESTAMP(" + c + ")" },
			nowEpoch: "UNIX_TIMESTAMP(NOW(6))",
			text:     func(e string) string { return "CAST(" + e + " AS CHAR)" },
			greatest: "GREATEST",
			leaseNow: "NOW(6)", leaseLater: func(x string) string { return "NOW(6) + INTERVAL (" + x + ") MICROSECOND" },
			insertIgnore: "INSERT IGNORE INTO outbox_adopted_leases (table_name, partition_no) VALUES (?, 0)",
		}
	case SQLite:
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
			leaseNow: sqliteNow, leaseLater: func(x string) string { return sqliteShift("+", x) },
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
			leaseNow: "now()", leaseLater: func(x string) string { return "now() + (" + x + ")::bigint * interval '1 microsecond'" },
			insertIgnore: "INSERT INTO outbox_adopted_leases (table_name, partition_no) VALUES (?, 0) ON CONFLICT DO NOTHING",
		}
	}
}

// bind turns the "?" placeholders of q into the dialect's.
// octets is the length in bytes of the text expression x.
func (ad adoptDialect) octets(x string) string {
	if ad.d == MySQL {
		return "LENGTH(" + x + ")"
	}
	return "octet_length(" + x + ")"
}

func (ad adoptDialect) bind(q string) string {
	if ad.d != Postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// lit is a status value as a SQL literal (values are validated: letters,
// digits and _ . : - only). A quoted literal compares with and assigns to
// integer columns too.
func lit(v string) string { return "'" + v + "'" }

// col is column c of the alias m, quoted.
func (a *Adopted) col(m, c string) string { return m + "." + a.ad.ident(c) }

// attempts, maxAttempts: the attempt columns as numbers (NULL is 0; a
// NULL max is the default).
func (a *Adopted) attempts(m string) string { return "COALESCE(" + a.col(m, a.p.Attempts) + ", 0)" }

func (a *Adopted) maxAttempts(m string) string {
	if a.p.MaxAttempts == "" {
		return a.p.MaxAttemptsLiteral()
	}
	return "COALESCE(" + a.col(m, a.p.MaxAttempts) + ", " + strconv.Itoa(adopt.DefaultMaxAttempts) + ")"
}

// ready is the predicate of rows still to deliver (due or not).
func (a *Adopted) ready(m string) string {
	st := a.col(m, a.p.Status)
	retryable := "(" + st + " = " + lit(a.p.Failed) + " AND " + a.attempts(m) + " < " + a.maxAttempts(m) + ")"
	if a.p.Pending == a.p.Failed {
		return retryable
	}
	return "(" + st + " = " + lit(a.p.Pending) + " OR " + retryable + ")"
}

// dead is the predicate of the table's dead rows.
func (a *Adopted) dead(m string) string {
	st := a.col(m, a.p.Status)
	exhausted := "(" + st + " = " + lit(a.p.Failed) + " AND " + a.attempts(m) + " >= " + a.maxAttempts(m) + ")"
	if a.p.DeadIsFailed() {
		return exhausted
	}
	return "(" + st + " = " + lit(a.p.Dead) + " OR " + exhausted + ")"
}

// due is the predicate of rows whose next attempt has come.
func (a *Adopted) due(m, now string) string {
	n := a.col(m, a.p.NextAttempt)
	return "(" + n + " IS NULL OR " + n + " <= " + now + ")"
}

// unsettled is the guard of every write back: the row is still in a
// state the relay delivers from.
func (a *Adopted) unsettled(m string) string {
	st := a.col(m, a.p.Status)
	return "(" + st + " IN (" + lit(a.p.Pending) + ", " + lit(a.p.Failed) + "))"
}

// fence is the lease check of every write back (arguments: table, owner).
func (a *Adopted) fence() string {
	return "EXISTS (SELECT 1 FROM outbox_adopted_leases AS l WHERE l.table_name = ? AND l.partition_no = 0 AND l.owner = ? AND l.expires_at > " + a.ad.leaseNow + ")"
}

func (a *Adopted) table() string { return a.ad.ident(a.p.Table) }

// statements builds the profile's statements from its validated
// identifiers and status values.
func (a *Adopted) statements() adoptedStatements {
	var s adoptedStatements
	s.read = a.readStatement()
	a.countStatements(&s)
	a.settleStatements(&s)
	a.leaseStatements(&s)
	return s
}

// readStatement is the read of ready rows: oldest first, a key's later
// rows held back while an earlier one waits.
func (a *Adopted) readStatement() string {
	p, ad := a.p, a.ad
	text := a.text
	// The read measures the payload and leaves it out past the base
	// store's bound (the first argument; see Store.WithPayloadLimit), so a
	// row of any size costs the relay no memory.
	cols := a.messageCols()
	payload := text(p.Payload)
	bound := "?"
	if ad.d == Postgres {
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
	if ad.d == SQLite {
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
func (a *Adopted) countStatements(s *adoptedStatements) {
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
func (a *Adopted) settleStatements(s *adoptedStatements) {
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
func (a *Adopted) leaseStatements(s *adoptedStatements) {
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

// Partitions is 1 once `outbox migrate` has made the lease table.
func (a *Adopted) Partitions(ctx context.Context) (int, error) {
	if _, err := queryInt(ctx, a.base.db, a.s.leaseExists); err != nil {
		return 0, fmt.Errorf("outbox_adopted_leases: %w", err)
	}
	return 1, nil
}

// CheckSchema checks that the table fits the profile (its columns are
// there with usable types); missing indexes are ServerAdvice.
func (a *Adopted) CheckSchema(ctx context.Context) error {
	r, err := a.Check(ctx)
	if err != nil {
		return err
	}
	if p := r.Problems(); len(p) > 0 {
		return fmt.Errorf("table %s does not fit profile %s: %s (outbox adopt check)", a.p.Table, a.p.Name, strings.Join(p, "; "))
	}
	return nil
}

// ServerAdvice is the base store's, plus the indexes the relay's read
// wants and the table lacks.
func (a *Adopted) ServerAdvice(ctx context.Context) ([]string, error) {
	adv, _ := a.base.ServerAdvice(ctx)
	r, err := a.Check(ctx)
	if err != nil {
		return adv, err
	}
	for _, ix := range r.MissingIndexes {
		adv = append(adv, "table "+a.p.Table+" has no index on ("+strings.Join(ix.Columns, ", ")+"): every read scans it (outbox adopt sql prints the index)")
	}
	return adv, nil
}

// DropRelay releases id's lease on the table and forgets its route views.
func (a *Adopted) DropRelay(ctx context.Context, id string) error {
	if _, err := a.base.execRetry(ctx, a.s.release, a.p.Table, id); err != nil {
		return err
	}
	return a.base.DropRelay(ctx, id)
}

// headerValues folds the headers column and the header columns into one
// JSON object. A headers column that is not a JSON object of strings is
// passed on as it is, for the relay to turn the row dead with the reason.
func (a *Adopted) headerValues(raw *string, cols []*string) string {
	names := a.p.HeaderNames()
	if raw == nil && len(names) == 0 {
		return ""
	}
	h := map[string]string{}
	if raw != nil && *raw != "" {
		if err := json.Unmarshal([]byte(*raw), &h); err != nil {
			return *raw
		}
		if h == nil { // JSON null: no headers
			h = map[string]string{}
		}
	}
	for i, name := range names {
		if cols[i] != nil && *cols[i] != "" {
			h[name] = *cols[i]
		}
	}
	if len(h) == 0 {
		return ""
	}
	b, _ := json.Marshal(h)
	return string(b)
}

// DerivedMessageID is the message id of row id of a table without a
// message id column: the same for every attempt and every relay.
func DerivedMessageID(table string, id int64) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("outbox:adopted/"+table+"/"+strconv.FormatInt(id, 10))).String()
}

// text is column c of the alias m as text, NULL when the table has no
// such column.
func (a *Adopted) text(c string) string {
	if c == "" {
		return "NULL"
	}
	return a.ad.text(a.col("m", c))
}

// messageCols are the columns a row query starts with, of the alias m:
// the id, then as text the message id, topic, key, payload, headers and
// header columns (messageScan reads them).
func (a *Adopted) messageCols() []string {
	p := a.p
	cols := []string{a.col("m", p.ID), a.text(p.MessageID), a.text(p.Topic), a.text(p.Key), a.text(p.Payload), a.text(p.Headers)}
	for _, h := range p.HeaderNames() {
		cols = append(cols, a.text(p.HeaderCol[h]))
	}
	return cols
}

// messageScan reads the messageCols of a row.
type messageScan struct {
	id                                  int64
	msgID, topic, key, payload, headers *string
	hcols                               []*string
}

// targets are the scan destinations of the messageCols.
func (m *messageScan) targets(a *Adopted) []any {
	m.hcols = make([]*string, len(a.p.HeaderNames()))
	dst := []any{&m.id, &m.msgID, &m.topic, &m.key, &m.payload, &m.headers}
	for i := range m.hcols {
		dst = append(dst, &m.hcols[i])
	}
	return dst
}

// row is the message as the relay reads it.
func (m *messageScan) row(a *Adopted) Row {
	r := Row{ID: m.id, MessageID: a.messageID(m.msgID, m.id), Topic: deref(m.topic), Payload: deref(m.payload),
		Headers: a.headerValues(m.headers, m.hcols), Partition: adoptedPartition}
	if a.p.Topic == "" {
		r.Topic = a.p.FixedTopic
	}
	if m.key != nil {
		r.Key, r.HasKey = *m.key, true
	}
	return r
}

// Read returns up to limit due rows, oldest first, skipping a key's rows
// while an earlier row of the key waits for its retry.
func (a *Adopted) Read(ctx context.Context, _ []int, limit int) ([]Row, error) {
	return appendRows(ctx, a.base.db, make([]Row, 0, limit), func(scan func(...any) error) (Row, error) {
		var m messageScan
		var attempts, maxAttempts int
		var created *float64
		var size *int64
		if err := scan(append(m.targets(a), &attempts, &maxAttempts, &created, &size)...); err != nil {
			return Row{}, err
		}
		r := m.row(a)
		if size != nil {
			r.PayloadBytes = *size
			r.Oversize = m.payload == nil
		}
		r.Attempts, r.MaxAttempts = attempts, maxAttempts
		if created != nil {
			r.CreatedAt = fromEpoch(*created)
		} else {
			r.CreatedAt = time.Now().UTC()
		}
		return r, nil
	}, a.s.read, a.base.readBound(), limit)
}

// MarkInflight records the highest row id about to be published.
func (a *Adopted) MarkInflight(ctx context.Context, owner string, parts []int, maxIDs []int64) error {
	if len(parts) != len(maxIDs) {
		return errors.New("store: MarkInflight: parts and ids differ in length")
	}
	var top int64
	for i, p := range parts {
		if p == adoptedPartition {
			top = maxIDs[i]
		}
	}
	_, err := a.base.execRetry(ctx, a.s.markInflight, top, a.p.Table, owner, top)
	return err
}

// ReadMark is Read followed, when it found rows, by MarkInflight for
// them.
func (a *Adopted) ReadMark(ctx context.Context, owner string, parts []int, limit int) ([]Row, error) {
	rows, err := a.Read(ctx, parts, limit)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	if err := a.MarkInflight(ctx, owner, parts, MaxIDs(parts, rows)); err != nil {
		return nil, err
	}
	return rows, nil
}

// maxErrorLen bounds what is written to the error column.
const maxErrorLen = 1000

// Settle writes the outcomes back in the table's vocabulary, fenced by
// owner's lease: sent rows in one statement, every other outcome in one
// of its own. A row that is no longer pending or failed (an operator or
// the application moved it) is left alone.
func (a *Adopted) Settle(ctx context.Context, owner string, outs []Outcome) (int64, error) {
	var total int64
	var sent []int64
	for _, o := range outs {
		if o.Status == StatusSent {
			sent = append(sent, o.ID)
			continue
		}
		var args []any
		if a.p.Error != "" {
			e := o.Error
			if len(e) > maxErrorLen {
				e = e[:maxErrorLen]
			}
			args = append(args, e)
		}
		var q string
		switch {
		case o.Status == StatusDead && o.CountAttempt:
			q = a.s.dead
		case o.Status == StatusDead:
			q = a.s.deadUncounted
		case o.CountAttempt:
			q, args = a.s.retry, append(args, o.Delay.Microseconds())
		default:
			q, args = a.s.postpone, append(args, o.Delay.Microseconds())
		}
		args = append(args, o.ID, a.p.Table, owner)
		n, err := a.base.execRetry(ctx, q, args...)
		if err != nil {
			return total, err
		}
		total += n
	}
	for len(sent) > 0 {
		chunk := sent[:min(len(sent), 500)]
		sent = sent[len(chunk):]
		args := make([]any, 0, len(chunk)+2)
		for _, id := range chunk {
			args = append(args, id)
		}
		args = append(args, a.p.Table, owner)
		n, err := a.base.execRetry(ctx, a.ad.bind(a.s.sentPrefix+placeholdersQ(len(chunk))+a.s.sentSuffix), args...)
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

func placeholdersQ(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

// Heartbeat registers relay id as serving the table (`outbox status
// --adopt` lists it) and lists only id: every relay of an adopted table
// competes for its one lease, and the others stand by until it lapses or
// is released. The relays of outbox_messages do not count it when they
// look for another relay that routes a topic.
func (a *Adopted) Heartbeat(ctx context.Context, id, routes string, _ time.Duration) ([]Relay, error) {
	if _, err := a.base.execRetry(ctx, a.base.s.registerRelay, id, routes, a.p.Table); err != nil {
		return nil, err
	}
	return []Relay{{ID: id}}, nil
}

// Relays lists the relays registered as serving the table, live or not,
// sorted by id.
func (a *Adopted) Relays(ctx context.Context) ([]Relay, error) {
	return a.base.relaysOf(ctx, a.p.Table)
}

// PruneRelays forgets relays not seen for longer than age, as the base
// store does.
func (a *Adopted) PruneRelays(ctx context.Context, age time.Duration) error {
	return a.base.PruneRelays(ctx, age)
}

// Renew extends owner's lease on the table.
func (a *Adopted) Renew(ctx context.Context, owner string, ttl time.Duration) (int64, error) {
	return a.base.execRetry(ctx, a.s.renew, ttl.Microseconds(), a.p.Table, owner)
}

// Acquire takes the table's lease when it is free or expired.
func (a *Adopted) Acquire(ctx context.Context, owner string, parts []int, ttl time.Duration) ([]Lease, error) {
	if len(parts) > 0 {
		if _, err := a.base.execRetry(ctx, a.s.ensureLease, a.p.Table); err != nil {
			return nil, err
		}
		if _, err := a.base.execRetry(ctx, a.s.acquire, owner, ttl.Microseconds(), a.p.Table, owner); err != nil {
			return nil, err
		}
	}
	return a.Held(ctx, owner)
}

// Held returns the table's lease if owner holds it.
func (a *Adopted) Held(ctx context.Context, owner string) ([]Lease, error) {
	return appendRows(ctx, a.base.db, nil, func(scan func(...any) error) (Lease, error) {
		var l Lease
		var prev string
		err := scan(&l.Partition, &l.InflightMaxID, &prev)
		l.Taken = prev != "" && prev != owner
		return l, err
	}, a.s.held, a.p.Table, owner)
}

// Release gives up owner's lease.
func (a *Adopted) Release(ctx context.Context, owner string, parts []int) error {
	if len(parts) == 0 {
		return nil
	}
	_, err := a.base.execRetry(ctx, a.s.release, a.p.Table, owner)
	return err
}

// RecordRoute records a route's state change, as the base store does.
func (a *Adopted) RecordRoute(ctx context.Context, relay, route string, down bool, reason string) error {
	return a.base.RecordRoute(ctx, relay, route, down, reason)
}

// Gauges samples the table: rows to deliver, dead rows, the oldest
// undelivered row's age, the database clock.
func (a *Adopted) Gauges(ctx context.Context) (GaugeSample, error) {
	var g GaugeSample
	rows, err := a.base.db.Query(ctx, a.s.gauges)
	if err != nil {
		return g, err
	}
	defer rows.Close()
	if rows.Next() {
		var age *float64
		var now float64
		if err := rows.Scan(&g.Pending, &g.Dead, &age, &now); err != nil {
			return g, err
		}
		g.OldestPendingAge = seconds(age)
		g.Now = fromEpoch(now)
	}
	return g, rows.Err()
}

// errNoRetention: retention and day partitions belong to outbox_messages.
var errNoRetention = errors.New("retention is not available on an adopted table: the application owns its rows")

// Retain is not available on an adopted table.
func (a *Adopted) Retain(context.Context, int64, int, RetentionPolicy) (RetentionBatch, error) {
	return RetentionBatch{}, errNoRetention
}

// RetainIn is not available on an adopted table.
func (a *Adopted) RetainIn(context.Context, string, int64, int, RetentionPolicy) (RetentionBatch, error) {
	return RetentionBatch{}, errNoRetention
}

// Partitioned is false: an adopted table is not partitioned by day.
func (a *Adopted) Partitioned(context.Context) (bool, error) { return false, nil }

// DayPartitions is none.
func (a *Adopted) DayPartitions(context.Context) ([]DayPartition, error) { return nil, nil }

// AddPartitions is not available on an adopted table.
func (a *Adopted) AddPartitions(context.Context, int, int) (int, error) { return 0, errNoRetention }

// PartitionState is not available on an adopted table.
func (a *Adopted) PartitionState(context.Context, string, RetentionPolicy) (PartitionState, error) {
	return PartitionState{}, errNoRetention
}

// DropPartition is not available on an adopted table.
func (a *Adopted) DropPartition(context.Context, DayPartition, bool) (bool, error) {
	return false, errNoRetention
}
