// Package adoptstore is the relay's store over a local message table an
// application already writes (the command's --adopt, docs/adopt.md): the
// engine's Store, the admin server's and the commands' reads and changes,
// in the table's own vocabulary as a profile of package adopt maps it.
// It builds its SQL on package store's building blocks and keeps its
// leases, relays and route health in the relay's own tables beside
// outbox_messages.
//
// The files, by job: store.go (the relay's reads, settles and leases),
// sql.go (the dialects, predicates and fixed statements), probe.go (the
// idle relay's wake-ups), admin.go and search.go (the operators' view:
// status, dead letters, the admin API), check.go (how a table fits its
// profile, and the DDL `outbox adopt sql` prints).
package adoptstore

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
	"github.com/txoutbox/outbox/internal/store"
)

// Store is the relay's store over a local message table an application
// already writes (see package adopt): it reads and settles that table's
// rows in the table's own vocabulary, and keeps its leases in the relay's
// own outbox_adopted_leases (migration 9). The table is one partition,
// served by one relay at a time; the others stand by. Route health goes
// to outbox_route_health, as for outbox_messages.
type Store struct {
	base *store.Store
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

// New returns the store over p's table, through base's database.
func New(base *store.Store, p *adopt.Profile) (*Store, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	a := &Store{base: base, p: p, ad: adoptDialectOf(base.Dialect())}
	a.s = a.statements()
	return a, nil
}

// Of returns the store over the adopted table when b's driver is a
// store.TableSource (store.Adopting wraps one), nil when it is not. Its
// reads leave out payloads over maxPayload bytes, as
// store.Store.WithPayloadLimit's do (0: no limit).
func Of(b *store.Backend, maxPayload int) (*Store, error) {
	p := b.AdoptedTable()
	if p == nil {
		return nil, nil
	}
	return New(b.Store.WithPayloadLimit(maxPayload), p)
}

// Profile is the profile the store serves.
func (a *Store) Profile() *adopt.Profile { return a.p }

// Base is the store over the relay's own tables.
func (a *Store) Base() *store.Store { return a.base }

// Partitions is 1 once `outbox migrate` has made the lease table.
func (a *Store) Partitions(ctx context.Context) (int, error) {
	if _, err := queryOne[int](ctx, a.base.Pool(), a.s.leaseExists); err != nil {
		return 0, fmt.Errorf("outbox_adopted_leases: %w", err)
	}
	return 1, nil
}

// CheckSchema checks that the table fits the profile (its columns are
// there with usable types); missing indexes are ServerAdvice.
func (a *Store) CheckSchema(ctx context.Context) error {
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
func (a *Store) ServerAdvice(ctx context.Context) ([]string, error) {
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
func (a *Store) DropRelay(ctx context.Context, id string) error {
	if _, err := a.base.ExecRetry(ctx, a.s.release, a.p.Table, id); err != nil {
		return err
	}
	return a.base.DropRelay(ctx, id)
}

// headerValues folds the headers column and the header columns into one
// JSON object. A headers column that is not a JSON object of strings is
// passed on as it is, for the relay to turn the row dead with the reason.
func (a *Store) headerValues(raw *string, cols []*string) string {
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
func (a *Store) text(c string) string {
	if c == "" {
		return "NULL"
	}
	return a.ad.text(a.col("m", c))
}

// messageCols are the columns a row query starts with, of the alias m:
// the id, then as text the message id, topic, key, payload, headers and
// header columns (messageScan reads them).
func (a *Store) messageCols() []string {
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
func (m *messageScan) targets(a *Store) []any {
	m.hcols = make([]*string, len(a.p.HeaderNames()))
	dst := []any{&m.id, &m.msgID, &m.topic, &m.key, &m.payload, &m.headers}
	for i := range m.hcols {
		dst = append(dst, &m.hcols[i])
	}
	return dst
}

// row is the message as the relay reads it.
func (m *messageScan) row(a *Store) store.Row {
	r := store.Row{ID: m.id, MessageID: a.messageID(m.msgID, m.id), Topic: deref(m.topic), Payload: deref(m.payload),
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
func (a *Store) Read(ctx context.Context, _ []int, limit int) ([]store.Row, error) {
	return store.AppendRows(ctx, a.base.Pool(), make([]store.Row, 0, limit), func(scan func(...any) error) (store.Row, error) {
		var m messageScan
		var attempts, maxAttempts int
		var created *float64
		var size *int64
		if err := scan(append(m.targets(a), &attempts, &maxAttempts, &created, &size)...); err != nil {
			return store.Row{}, err
		}
		r := m.row(a)
		if size != nil {
			r.PayloadBytes = *size
			r.Oversize = m.payload == nil
		}
		r.Attempts, r.MaxAttempts = attempts, maxAttempts
		if created != nil {
			r.CreatedAt = store.FromEpoch(*created)
		} else {
			r.CreatedAt = time.Now().UTC()
		}
		return r, nil
	}, a.s.read, a.base.ReadBound(), limit)
}

// MarkInflight records the highest row id about to be published.
func (a *Store) MarkInflight(ctx context.Context, owner string, parts []int, maxIDs []int64) error {
	if len(parts) != len(maxIDs) {
		return errors.New("store: MarkInflight: parts and ids differ in length")
	}
	var top int64
	for i, p := range parts {
		if p == adoptedPartition {
			top = maxIDs[i]
		}
	}
	_, err := a.base.ExecRetry(ctx, a.s.markInflight, top, a.p.Table, owner, top)
	return err
}

// ReadMark is Read followed, when it found rows, by MarkInflight for
// them.
func (a *Store) ReadMark(ctx context.Context, owner string, parts []int, limit int) ([]store.Row, error) {
	rows, err := a.Read(ctx, parts, limit)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	if err := a.MarkInflight(ctx, owner, parts, store.MaxIDs(parts, rows)); err != nil {
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
func (a *Store) Settle(ctx context.Context, owner string, outs []store.Outcome) (int64, error) {
	var total int64
	var sent []int64
	for _, o := range outs {
		if o.Status == store.StatusSent {
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
		case o.Status == store.StatusDead && o.CountAttempt:
			q = a.s.dead
		case o.Status == store.StatusDead:
			q = a.s.deadUncounted
		case o.CountAttempt:
			q, args = a.s.retry, append(args, o.Delay.Microseconds())
		default:
			q, args = a.s.postpone, append(args, o.Delay.Microseconds())
		}
		args = append(args, o.ID, a.p.Table, owner)
		n, err := a.base.ExecRetry(ctx, q, args...)
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
		n, err := a.base.ExecRetry(ctx, a.ad.bind(a.s.sentPrefix+placeholdersQ(len(chunk))+a.s.sentSuffix), args...)
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// Heartbeat registers relay id as serving the table (`outbox status
// --adopt` lists it) and lists only id: every relay of an adopted table
// competes for its one lease, and the others stand by until it lapses or
// is released. The relays of outbox_messages do not count it when they
// look for another relay that routes a topic.
func (a *Store) Heartbeat(ctx context.Context, id, routes string, _ time.Duration) ([]store.Relay, error) {
	if err := a.base.RegisterRelay(ctx, id, routes, a.p.Table); err != nil {
		return nil, err
	}
	return []store.Relay{{ID: id}}, nil
}

// Relays lists the relays registered as serving the table, live or not,
// sorted by id.
func (a *Store) Relays(ctx context.Context) ([]store.Relay, error) {
	return a.base.RelaysOf(ctx, a.p.Table)
}

// PruneRelays forgets relays not seen for longer than age, as the base
// store does.
func (a *Store) PruneRelays(ctx context.Context, age time.Duration) error {
	return a.base.PruneRelays(ctx, age)
}

// Renew extends owner's lease on the table.
func (a *Store) Renew(ctx context.Context, owner string, ttl time.Duration) (int64, error) {
	return a.base.ExecRetry(ctx, a.s.renew, ttl.Microseconds(), a.p.Table, owner)
}

// Acquire takes the table's lease when it is free or expired.
func (a *Store) Acquire(ctx context.Context, owner string, parts []int, ttl time.Duration) ([]store.Lease, error) {
	if len(parts) > 0 {
		if _, err := a.base.ExecRetry(ctx, a.s.ensureLease, a.p.Table); err != nil {
			return nil, err
		}
		if _, err := a.base.ExecRetry(ctx, a.s.acquire, owner, ttl.Microseconds(), a.p.Table, owner); err != nil {
			return nil, err
		}
	}
	return a.Held(ctx, owner)
}

// Held returns the table's lease if owner holds it.
func (a *Store) Held(ctx context.Context, owner string) ([]store.Lease, error) {
	return store.AppendRows(ctx, a.base.Pool(), nil, func(scan func(...any) error) (store.Lease, error) {
		var l store.Lease
		var prev string
		err := scan(&l.Partition, &l.InflightMaxID, &prev)
		l.Taken = prev != "" && prev != owner
		return l, err
	}, a.s.held, a.p.Table, owner)
}

// Release gives up owner's lease.
func (a *Store) Release(ctx context.Context, owner string, parts []int) error {
	if len(parts) == 0 {
		return nil
	}
	_, err := a.base.ExecRetry(ctx, a.s.release, a.p.Table, owner)
	return err
}

// RecordRoute records a route's state change, as the base store does.
func (a *Store) RecordRoute(ctx context.Context, relay, route string, down bool, reason string) error {
	return a.base.RecordRoute(ctx, relay, route, down, reason)
}

// Gauges samples the table: rows to deliver, dead rows, the oldest
// undelivered row's age, the database clock.
func (a *Store) Gauges(ctx context.Context) (store.GaugeSample, error) {
	var g store.GaugeSample
	rows, err := a.base.Pool().Query(ctx, a.s.gauges)
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
		g.OldestPendingAge = store.Seconds(age)
		g.Now = store.FromEpoch(now)
	}
	return g, rows.Err()
}

// errNoRetention: retention and day partitions belong to outbox_messages.
var errNoRetention = errors.New("retention is not available on an adopted table: the application owns its rows")

// Retain is not available on an adopted table.
func (a *Store) Retain(context.Context, int64, int, store.RetentionPolicy) (store.RetentionBatch, error) {
	return store.RetentionBatch{}, errNoRetention
}

// RetainIn is not available on an adopted table.
func (a *Store) RetainIn(context.Context, string, int64, int, store.RetentionPolicy) (store.RetentionBatch, error) {
	return store.RetentionBatch{}, errNoRetention
}

// Partitioned is false: an adopted table is not partitioned by day.
func (a *Store) Partitioned(context.Context) (bool, error) { return false, nil }

// DayPartitions is none.
func (a *Store) DayPartitions(context.Context) ([]store.DayPartition, error) { return nil, nil }

// AddPartitions is not available on an adopted table.
func (a *Store) AddPartitions(context.Context, int, int) (int, error) { return 0, errNoRetention }

// PartitionState is not available on an adopted table.
func (a *Store) PartitionState(context.Context, string, store.RetentionPolicy) (store.PartitionState, error) {
	return store.PartitionState{}, errNoRetention
}

// DropPartition is not available on an adopted table.
func (a *Store) DropPartition(context.Context, store.DayPartition, bool) (bool, error) {
	return false, errNoRetention
}

// queryOne runs a query of one value through q: the first row's, the zero
// value without a row.
func queryOne[T any](ctx context.Context, q store.Querier, sql string, args ...any) (T, error) {
	vs, err := store.AppendRows(ctx, q, nil, func(scan func(...any) error) (T, error) {
		var v T
		err := scan(&v)
		return v, err
	}, sql, args...)
	var v T
	if len(vs) > 0 {
		v = vs[0]
	}
	return v, err
}
