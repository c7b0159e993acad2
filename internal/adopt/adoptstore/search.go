package adoptstore

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/txoutbox/outbox/internal/store"
)

// The admin API's view of an adopted table: search, one row, requeue of
// one row and the counts by the table's own status values.

// StateCount is how many rows of an adopted table carry one status value.
type StateCount struct {
	State string
	Count int64
}

// Now is the database clock.
func (a *Store) Now(ctx context.Context) (time.Time, error) { return a.base.Now(ctx) }

// InsertAudit records a change in the relay's outbox_audit.
func (a *Store) InsertAudit(ctx context.Context, e store.AuditEntry) error {
	return a.base.InsertAudit(ctx, e)
}

// Audit lists the newest changes of outbox_audit.
func (a *Store) Audit(ctx context.Context, limit int) ([]store.AuditEntry, error) {
	return a.base.Audit(ctx, limit)
}

// StateCounts counts the table's rows by their status value, in the
// table's own vocabulary.
func (a *Store) StateCounts(ctx context.Context) ([]StateCount, error) {
	st := "COALESCE(" + a.text(a.p.Status) + ", '')"
	q := "SELECT " + st + ", count(*) FROM " + a.table() + " AS m GROUP BY " + st + " ORDER BY 1"
	return store.AppendRows(ctx, a.base.Pool(), nil, func(scan func(...any) error) (StateCount, error) {
		var c StateCount
		err := scan(&c.State, &c.Count)
		return c, err
	}, q)
}

// recordCols are the columns of a store.Record, of the alias m.
func (a *Store) recordCols() []string {
	p, ad := a.p, a.ad
	epoch := func(c string) string {
		if c == "" {
			return "NULL"
		}
		return ad.epoch(a.col("m", c))
	}
	return append(a.messageCols(), a.class("m"), a.text(p.Status), a.attempts("m"), a.maxAttempts("m"),
		epoch(p.NextAttempt), epoch(p.CreatedAt), a.text(p.Error))
}

// scanRecord reads the recordCols of a row; full keeps the whole payload
// and the headers.
func (a *Store) scanRecord(scan func(...any) error, full bool) (store.Record, error) {
	var ms messageScan
	var r store.Record
	var tableStatus *string
	var next, created *float64
	if err := scan(append(ms.targets(a), &r.Status, &tableStatus, &r.Attempts, &r.MaxAttempts, &next, &created, &r.LastError)...); err != nil {
		return r, err
	}
	row := ms.row(a)
	r.ID, r.MessageID, r.Topic, r.Payload, r.TableStatus = row.ID, row.MessageID, row.Topic, row.Payload, deref(tableStatus)
	if row.HasKey {
		k := row.Key
		r.Key = &k
	}
	if full {
		r.Headers = row.Headers
	} else if rs := []rune(r.Payload); len(rs) > store.PreviewChars {
		r.Payload = string(rs[:store.PreviewChars])
	}
	if created != nil {
		r.CreatedAt = store.FromEpoch(*created)
	}
	switch {
	case next != nil:
		r.AvailableAt = store.FromEpoch(*next)
	default:
		r.AvailableAt = r.CreatedAt
	}
	if r.LastError != nil && *r.LastError == "" {
		r.LastError = nil
	}
	return r, nil
}

// Search lists the table's rows that match s, newest first. Status is
// the outbox status a row counts as (pending, sent, consumed, dead);
// Since and Until need the profile's created-at column, and are ignored
// without it.
func (a *Store) Search(ctx context.Context, s store.Search) ([]store.Record, error) {
	p, ad := a.p, a.ad
	var where []string
	var args []any
	if s.Status != "" {
		where = append(where, a.class("m")+" = ?")
		args = append(args, s.Status)
	}
	switch {
	case s.Topic != "" && p.Topic != "":
		where = append(where, a.col("m", p.Topic)+" = ?")
		args = append(args, s.Topic)
	case s.Topic != "" && s.Topic != p.FixedTopic:
		return nil, nil
	}
	switch {
	case s.Key != "" && p.Key != "":
		where = append(where, a.col("m", p.Key)+" = ?")
		args = append(args, s.Key)
	case s.Key != "":
		return nil, nil
	}
	if s.MessageID != "" {
		id, ok, err := a.rowOf(ctx, s.MessageID)
		if err != nil || !ok {
			return nil, err
		}
		where = append(where, a.col("m", p.ID)+" = ?")
		args = append(args, id)
	}
	if p.CreatedAt != "" && !s.Since.IsZero() {
		where = append(where, ad.epoch(a.col("m", p.CreatedAt))+" >= ?")
		args = append(args, epochOf(s.Since))
	}
	if p.CreatedAt != "" && !s.Until.IsZero() {
		where = append(where, ad.epoch(a.col("m", p.CreatedAt))+" < ?")
		args = append(args, epochOf(s.Until))
	}
	if s.Before > 0 {
		where = append(where, a.col("m", p.ID)+" < ?")
		args = append(args, s.Before)
	}
	limit := s.Limit
	if limit <= 0 {
		limit = 50
	}
	args = append(args, limit)
	q := "SELECT " + strings.Join(a.recordCols(), ", ") + " FROM " + a.table() + " AS m"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q = ad.bind(q + " ORDER BY " + a.col("m", p.ID) + " DESC LIMIT ?")
	return store.AppendRows(ctx, a.base.Pool(), nil, func(scan func(...any) error) (store.Record, error) {
		return a.scanRecord(scan, false)
	}, q, args...)
}

// epochOf is t as float seconds since the epoch.
func epochOf(t time.Time) float64 { return float64(t.UnixMicro()) / 1e6 }

// Get returns the row whose message id is id (the table's, or the
// derived one), store.ErrNotFound when there is none.
func (a *Store) Get(ctx context.Context, id string) (store.Record, error) {
	row, ok, err := a.rowOf(ctx, id)
	if err != nil {
		return store.Record{}, err
	}
	if !ok {
		return store.Record{}, store.ErrNotFound
	}
	q := a.ad.bind("SELECT " + strings.Join(a.recordCols(), ", ") + " FROM " + a.table() + " AS m WHERE " + a.col("m", a.p.ID) + " = ?")
	recs, err := store.AppendRows(ctx, a.base.Pool(), nil, func(scan func(...any) error) (store.Record, error) {
		return a.scanRecord(scan, true)
	}, q, row)
	switch {
	case err != nil:
		return store.Record{}, err
	case len(recs) == 0:
		return store.Record{}, store.ErrNotFound
	}
	return recs[0], nil
}

// RequeueOne moves the dead row whose message id is id back to the
// table's pending status, attempts reset and due at once: store.ErrNotFound
// when there is no such row, a *store.StatusError when it is not dead.
func (a *Store) RequeueOne(ctx context.Context, id string) error {
	rec, err := a.Get(ctx, id)
	if err != nil {
		return err
	}
	n, err := a.RequeueRows(ctx, []int64{rec.ID})
	if err != nil || n == 1 {
		return err
	}
	if rec, err = a.Get(ctx, id); err != nil {
		return err
	}
	return &store.StatusError{Status: rec.Status}
}

// derivedScanPage is how many row ids one query of a derived message
// id's lookup reads.
const derivedScanPage = 10000

// rowOf finds the row id of message id: by the message id column, or,
// without one, by deriving the ids of the table's rows until one matches
// (a read of every row id in the worst case).
func (a *Store) rowOf(ctx context.Context, msgID string) (int64, bool, error) {
	p, ad := a.p, a.ad
	if p.MessageID != "" {
		q := ad.bind("SELECT " + a.col("m", p.ID) + " FROM " + a.table() + " AS m WHERE " + a.text(p.MessageID) + " = ? ORDER BY " + a.col("m", p.ID) + " LIMIT 1")
		ids, err := store.AppendRows(ctx, a.base.Pool(), nil, func(scan func(...any) error) (int64, error) {
			var id int64
			return id, scan(&id)
		}, q, msgID)
		if err != nil || len(ids) == 0 {
			return 0, false, err
		}
		return ids[0], true, nil
	}
	if u, err := uuid.Parse(msgID); err != nil || u.Version() != 5 {
		return 0, false, nil // not a derived id
	}
	q := ad.bind("SELECT " + a.col("m", p.ID) + " FROM " + a.table() + " AS m WHERE " + a.col("m", p.ID) + " > ? ORDER BY " + a.col("m", p.ID) + " LIMIT ?")
	after := int64(-1 << 63)
	for {
		ids, err := store.AppendRows(ctx, a.base.Pool(), make([]int64, 0, derivedScanPage), func(scan func(...any) error) (int64, error) {
			var id int64
			return id, scan(&id)
		}, q, after, derivedScanPage)
		if err != nil {
			return 0, false, err
		}
		for _, id := range ids {
			if DerivedMessageID(p.Table, id) == msgID {
				return id, true, nil
			}
			after = id
		}
		if len(ids) < derivedScanPage {
			return 0, false, nil
		}
	}
}
