package adoptstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/txoutbox/outbox/internal/adopt"
	"github.com/txoutbox/outbox/internal/store"
)

// Fit is how an adopted table fits its profile.
type Fit struct {
	// NoTable is set when the table does not exist.
	NoTable bool
	// Columns are the problems with the profile's columns: missing, or
	// of a type the relay cannot use.
	Columns []string
	// MissingIndexes are the indexes the relay's read wants and the
	// table lacks (outbox adopt sql prints them).
	MissingIndexes []IndexSpec
}

// IndexSpec is an index the relay recommends on an adopted table.
type IndexSpec struct {
	Name    string
	Columns []string
	Why     string
}

// Problems are the column problems, one line each ("" none).
func (c *Fit) Problems() []string {
	if c.NoTable {
		return []string{"no such table"}
	}
	return c.Columns
}

// Fits reports whether the table fits with nothing missing.
func (c *Fit) Fits() bool {
	return !c.NoTable && len(c.Columns) == 0 && len(c.MissingIndexes) == 0
}

// typeClass sorts a column type: "int", "time", "text" or "other".
func typeClass(d store.Dialect, t string) string {
	t = strings.ToLower(t)
	switch {
	case strings.Contains(t, "int") || t == "serial" || t == "bigserial":
		return "int"
	case strings.Contains(t, "time") || strings.Contains(t, "date"):
		return "time"
	case strings.Contains(t, "char") || strings.Contains(t, "text") || strings.Contains(t, "json") || strings.Contains(t, "clob") ||
		t == "enum" || strings.HasPrefix(t, "enum") || t == "uuid" || strings.HasPrefix(t, "varchar"):
		return "text"
	case d == store.SQLite && t == "":
		return "text"
	}
	return "other"
}

// columnTypes returns the table's columns (lower-cased) with their types.
func (a *Store) columnTypes(ctx context.Context) (map[string]string, error) {
	var q string
	var arg any = a.p.Table
	switch a.ad.d {
	case store.MySQL:
		q = `SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ?`
	case store.SQLite:
		q = `SELECT name, type FROM pragma_table_info(?)`
	default:
		q = `SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) FROM pg_attribute AS a
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`
		arg = quote(a.p.Table)
	}
	rows, err := a.base.Pool().Query(ctx, q, arg)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			return nil, err
		}
		out[strings.ToLower(name)] = typ
	}
	return out, rows.Err()
}

// indexes returns the table's indexes as their column lists (lower-cased).
func (a *Store) indexes(ctx context.Context) ([][]string, error) {
	var q string
	var arg any = a.p.Table
	switch a.ad.d {
	case store.MySQL:
		q = `SELECT index_name, column_name FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = ? ORDER BY index_name, seq_in_index`
	case store.SQLite:
		q = `SELECT il.name, ii.name FROM pragma_index_list(?) AS il, pragma_index_info(il.name) AS ii ORDER BY il.name, ii.seqno`
	default:
		q = `SELECT i.relname::text, a.attname::text FROM pg_index AS x JOIN pg_class AS i ON i.oid = x.indexrelid
  CROSS JOIN LATERAL unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
  JOIN pg_attribute AS a ON a.attrelid = x.indrelid AND a.attnum = k.attnum
WHERE x.indrelid = to_regclass($1) ORDER BY i.relname, k.ord`
		arg = quote(a.p.Table)
	}
	rows, err := a.base.Pool().Query(ctx, q, arg)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]string
	last := ""
	for rows.Next() {
		var ix, col string
		if err := rows.Scan(&ix, &col); err != nil {
			return nil, err
		}
		if ix != last || len(out) == 0 {
			out = append(out, nil)
			last = ix
		}
		out[len(out)-1] = append(out[len(out)-1], strings.ToLower(col))
	}
	return out, rows.Err()
}

// WantedIndexes are the indexes the relay's read wants on the table: the
// due rows by status and next attempt, and a key's earlier rows.
func (a *Store) WantedIndexes() []IndexSpec {
	name := func(suffix string) string {
		n := a.p.Table
		if len(n)+len(suffix) > 63 {
			n = n[:63-len(suffix)]
		}
		return n + suffix
	}
	out := []IndexSpec{{Name: name("_outbox_due_idx"), Columns: []string{a.p.Status, a.p.NextAttempt}, Why: "the read finds due rows by status and next attempt"}}
	if a.p.Key != "" {
		out = append(out, IndexSpec{Name: name("_outbox_key_idx"), Columns: []string{a.p.Key, a.p.ID}, Why: "the read checks a key's earlier rows"})
	}
	return out
}

// Check compares the table with the profile: its columns and their
// types, and the indexes the read wants.
func (a *Store) Check(ctx context.Context) (*Fit, error) {
	cols, err := a.columnTypes(ctx)
	if err != nil {
		return nil, err
	}
	r := &Fit{}
	if len(cols) == 0 {
		r.NoTable = true
		return r, nil
	}
	p := a.p
	type want struct {
		role, col string
		classes   []string
	}
	anyText := []string{"text", "int"}
	wants := []want{
		{"id", p.ID, []string{"int"}},
		{"message_id", p.MessageID, anyText},
		{"topic", p.Topic, anyText},
		{"key", p.Key, anyText},
		{"payload", p.Payload, []string{"text"}},
		{"headers", p.Headers, []string{"text"}},
		{"status", p.Status, anyText},
		{"attempts", p.Attempts, []string{"int"}},
		{"max_attempts", p.MaxAttempts, []string{"int"}},
		{"next_attempt", p.NextAttempt, []string{"time"}},
		{"error", p.Error, []string{"text"}},
		{"created_at", p.CreatedAt, []string{"time"}},
		{"updated_at", p.UpdatedAt, []string{"time"}},
	}
	for _, h := range p.HeaderNames() {
		wants = append(wants, want{"header " + h, p.HeaderCol[h], anyText})
	}
	for _, w := range wants {
		if w.col == "" {
			continue
		}
		typ, ok := cols[strings.ToLower(w.col)]
		if !ok {
			r.Columns = append(r.Columns, fmt.Sprintf("missing column %s (%s)", w.col, w.role))
			continue
		}
		cls := typeClass(a.ad.d, typ)
		if a.ad.d == store.SQLite && slices.Contains(w.classes, "time") && cls != "int" {
			continue // SQLite keeps times as text
		}
		if !slices.Contains(w.classes, cls) {
			r.Columns = append(r.Columns, fmt.Sprintf("column %s (%s) has type %s, wants %s", w.col, w.role, typ, strings.Join(w.classes, " or ")))
		}
	}
	ixs, err := a.indexes(ctx)
	if err != nil {
		return nil, err
	}
	for _, w := range a.WantedIndexes() {
		if !hasIndexOn(ixs, w.Columns) {
			r.MissingIndexes = append(r.MissingIndexes, w)
		}
	}
	return r, nil
}

// hasIndexOn reports whether an index starts with cols (the first of
// them at least, and the second when the index has one).
func hasIndexOn(ixs [][]string, cols []string) bool {
	for _, ix := range ixs {
		if len(ix) > 0 && ix[0] == strings.ToLower(cols[0]) && (len(ix) == 1 || len(cols) == 1 || ix[1] == strings.ToLower(cols[1])) {
			return true
		}
	}
	return false
}

// SQL is the additive DDL the relay recommends on p's table in
// dialect d: the indexes its read wants and, on PostgreSQL (unless only
// names indexes), the trigger that wakes an idle relay; nothing that
// changes an existing column.
func SQL(d store.Dialect, p *adopt.Profile, only []IndexSpec) string {
	ad := adoptDialectOf(d)
	a := &Store{p: p, ad: ad}
	specs := only
	if specs == nil {
		specs = a.WantedIndexes()
	}
	var b strings.Builder
	for _, ix := range specs {
		cols := make([]string, len(ix.Columns))
		for i, c := range ix.Columns {
			cols[i] = ad.ident(c)
		}
		fmt.Fprintf(&b, "-- %s\nCREATE INDEX %s ON %s (%s);\n", ix.Why, ad.ident(ix.Name), ad.ident(p.Table), strings.Join(cols, ", "))
	}
	if d == store.Postgres && only == nil {
		b.WriteString("-- wakes an idle relay within milliseconds of each INSERT (LISTEN/NOTIFY, only while a relay is idle;\n" +
			"-- the function is outbox migrate's, schema version 18); without it the relay probes the table's highest id\n" +
			WakeTriggerSQL(p.Table) + ";\n")
	}
	return b.String()
}
