package adoptstore

import (
	"context"
	"slices"
	"strings"

	"github.com/txoutbox/outbox/internal/store"
)

// The operator's view of an adopted table: `outbox status`, `dead list`
// and `dead requeue` with --adopt.

// class is the outbox status a row of the table counts as: pending
// (still to deliver), sent, consumed, dead, or "other" (a status value
// the profile does not name).
func (a *Store) class(m string) string {
	st := a.col(m, a.p.Status)
	c := "CASE WHEN " + a.ready(m) + " THEN 'pending' WHEN " + a.dead(m) + " THEN 'dead' WHEN " + st + " = " + lit(a.p.Sent) + " THEN 'sent'"
	if a.p.Consumed != "" {
		c += " WHEN " + st + " = " + lit(a.p.Consumed) + " THEN 'consumed'"
	}
	return c + " ELSE 'other' END"
}

// Stats counts the table's rows by outbox status and topic and measures
// the oldest undelivered and oldest due rows' ages.
func (a *Store) Stats(ctx context.Context) (store.Stats, error) {
	var s store.Stats
	topic := "''"
	if a.p.Topic != "" {
		topic = "COALESCE(" + a.ad.text(a.col("m", a.p.Topic)) + ", '')"
	}
	q := "SELECT c, t, count(*) FROM (SELECT " + a.class("m") + " AS c, " + topic + " AS t FROM " + a.table() + " AS m) AS x GROUP BY c, t ORDER BY c, t"
	rows, err := a.base.Pool().Query(ctx, q)
	if err != nil {
		return s, err
	}
	for rows.Next() {
		var tc store.TopicCount
		if err := rows.Scan(&tc.Status, &tc.Topic, &tc.Count); err != nil {
			rows.Close()
			return s, err
		}
		if a.p.Topic == "" {
			tc.Topic = a.p.FixedTopic
		}
		s.Add(tc)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s, err
	}
	g, err := a.Gauges(ctx)
	if err != nil {
		return s, err
	}
	s.OldestPendingAge = g.OldestPendingAge
	since := a.col("m", a.p.NextAttempt)
	if a.p.CreatedAt != "" {
		since = "COALESCE(" + since + ", " + a.col("m", a.p.CreatedAt) + ")"
	}
	age, err := queryOne[*float64](ctx, a.base.Pool(), "SELECT max("+a.ad.nowEpoch+" - "+a.ad.epoch(since)+") FROM "+a.table()+" AS m WHERE "+a.ready("m")+" AND "+a.due("m", a.ad.now))
	s.OldestDueAge = store.Seconds(age)
	return s, err
}

// RouteHealth lists the route views of the relay holding the table's
// lease: the one publishing from it (the others stand by).
func (a *Store) RouteHealth(ctx context.Context) ([]store.RouteHealth, error) {
	var age string
	switch a.ad.d {
	case store.MySQL:
		age = "TIMESTAMPDIFF(MICROSECOND, h.since, NOW(6)) / 1000000.0"
	case store.SQLite:
		age = "(julianday('now') - julianday(h.since)) * 86400.0"
	default:
		age = "extract(epoch from now() - h.since)::float8"
	}
	q := a.ad.bind(`SELECT h.route, h.relay_id, h.state, ` + age + `, h.reason
FROM outbox_route_health AS h JOIN outbox_adopted_leases AS l ON l.owner = h.relay_id
WHERE l.table_name = ? AND l.expires_at > ` + a.ad.leaseNow + ` ORDER BY h.route, h.relay_id`)
	return store.AppendRows(ctx, a.base.Pool(), nil, func(scan func(...any) error) (store.RouteHealth, error) {
		var h store.RouteHealth
		var secs float64
		err := scan(&h.Route, &h.Relay, &h.State, &secs, &h.Reason)
		h.For = store.Seconds(&secs)
		return h, err
	}, q, a.p.Table)
}

// ListDead returns up to limit of the table's dead rows (of topic, when
// not ""), oldest first, as messages: Status is the table's own value,
// AvailableAt its next attempt.
func (a *Store) ListDead(ctx context.Context, topic string, limit int) ([]store.Message, error) {
	p, ad := a.p, a.ad
	epoch := func(c string) string {
		if c == "" {
			return "NULL"
		}
		return ad.epoch(a.col("m", c))
	}
	cols := append(a.messageCols(), a.text(p.Status), a.attempts("m"), a.maxAttempts("m"), epoch(p.NextAttempt), epoch(p.CreatedAt), a.text(p.Error))
	where := a.dead("m")
	var args []any
	if topic != "" && p.Topic != "" {
		where += " AND " + a.col("m", p.Topic) + " = ?"
		args = append(args, topic)
	} else if topic != "" && topic != p.FixedTopic {
		return nil, nil
	}
	args = append(args, limit)
	q := ad.bind("SELECT " + strings.Join(cols, ", ") + " FROM " + a.table() + " AS m WHERE " + where + " ORDER BY " + a.col("m", p.ID) + " LIMIT ?")
	return store.AppendRows(ctx, a.base.Pool(), nil, func(scan func(...any) error) (store.Message, error) {
		var ms messageScan
		var m store.Message
		var status, errText *string
		var next, created *float64
		if err := scan(append(ms.targets(a), &status, &m.Attempts, &m.MaxAttempts, &next, &created, &errText)...); err != nil {
			return m, err
		}
		r := ms.row(a)
		m.ID, m.MessageID, m.Topic, m.Key, m.Payload, m.Headers = r.ID, r.MessageID, r.Topic, r.Key, r.Payload, r.Headers
		m.Status, m.LastError = deref(status), deref(errText)
		if created != nil {
			m.CreatedAt = store.FromEpoch(*created)
		}
		if next != nil {
			m.AvailableAt = store.FromEpoch(*next)
		}
		return m, nil
	}, q, args...)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// messageID is a row's message id: its column's, else the derived one.
func (a *Store) messageID(col *string, id int64) string {
	if col != nil && *col != "" {
		return *col
	}
	return DerivedMessageID(a.p.Table, id)
}

// DeadRows returns the row ids of the table's dead rows of topic (all
// when "") whose message id is among ids (all when empty).
func (a *Store) DeadRows(ctx context.Context, topic string, ids []string) ([]int64, error) {
	var out []int64
	after := int64(-1 << 63)
	for {
		msgs, err := a.deadAfter(ctx, topic, after, 1000)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if len(ids) == 0 || slices.Contains(ids, m.MessageID) {
				out = append(out, m.ID)
			}
			after = m.ID
		}
		if len(msgs) < 1000 {
			return out, nil
		}
	}
}

// deadAfter is up to limit dead rows of topic with an id above after:
// their ids and message ids.
func (a *Store) deadAfter(ctx context.Context, topic string, after int64, limit int) ([]store.Message, error) {
	p := a.p
	msgID := "NULL"
	if p.MessageID != "" {
		msgID = a.ad.text(a.col("m", p.MessageID))
	}
	where := a.dead("m") + " AND " + a.col("m", p.ID) + " > ?"
	args := []any{after}
	switch {
	case topic != "" && p.Topic != "":
		where += " AND " + a.col("m", p.Topic) + " = ?"
		args = append(args, topic)
	case topic != "" && topic != p.FixedTopic:
		return nil, nil
	}
	args = append(args, limit)
	q := a.ad.bind("SELECT " + a.col("m", p.ID) + ", " + msgID + " FROM " + a.table() + " AS m WHERE " + where + " ORDER BY " + a.col("m", p.ID) + " LIMIT ?")
	return store.AppendRows(ctx, a.base.Pool(), nil, func(scan func(...any) error) (store.Message, error) {
		var m store.Message
		var id *string
		err := scan(&m.ID, &id)
		m.MessageID = a.messageID(id, m.ID)
		return m, err
	}, q, args...)
}

// RequeueRows moves the dead rows among ids back to the table's pending
// status with their attempts reset and due at once, and returns how many
// it moved.
func (a *Store) RequeueRows(ctx context.Context, ids []int64) (int64, error) {
	p, ad := a.p, a.ad
	set := []string{ad.ident(p.Status) + " = " + lit(p.Pending), ad.ident(p.Attempts) + " = 0", ad.ident(p.NextAttempt) + " = NULL"}
	if p.UpdatedAt != "" {
		set = append(set, ad.ident(p.UpdatedAt)+" = "+ad.now)
	}
	var total int64
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), 500)]
		ids = ids[len(chunk):]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		q := ad.bind("UPDATE " + a.table() + " AS m SET " + strings.Join(set, ", ") + " WHERE " + a.col("m", p.ID) + " IN (" + placeholdersQ(len(chunk)) + ") AND " + a.dead("m"))
		n, err := a.base.ExecRetry(ctx, q, args...)
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}
