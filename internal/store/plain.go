package store

import (
	"context"
	"encoding/json"
	"time"
)

// plain is what MySQL and SQLite share, having none of PostgreSQL's types:
// "?" placeholders, message ids and headers stored as text, false as 0,
// and lists passed as one JSON array argument, which the statements read
// as a table (JSON_TABLE on MySQL, json_each on SQLite). Both embed it,
// and override what they do otherwise.
type plain struct{}

func (plain) ph(int) string { return "?" }

func (plain) pool(db Querier) Querier { return db }

func (plain) text(col string) string { return col }

func (plain) falseSQL() string { return "0" }

func (plain) msgIDEq() string { return "message_id = {}" }

func (plain) createdRange(since, until time.Time) (time.Time, time.Time, bool) {
	return since, until, false
}

func (plain) insertOneArgs(m *NewMessage) []any { return oneArgs(m) }

// jsonList renders v as a JSON array argument.
func jsonList(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func (plain) intList(v []int) any { return jsonList(v) }

func (plain) idList(v []int64) any { return jsonList(v) }

// insertBatch passes one JSON array of rows, in the column order of
// oneArgs; a unique violation reports every id of the batch.
func (plain) insertBatch(ctx context.Context, q Querier, stmt string, msgs []NewMessage) error {
	arr := make([][8]any, len(msgs))
	for i, m := range msgs {
		var key, maxAttempts, notBefore any
		if m.Key != "" {
			key = m.Key
		}
		if m.MaxAttempts > 0 {
			maxAttempts = m.MaxAttempts
		}
		if !m.NotBefore.IsZero() {
			notBefore = m.NotBefore.UnixMicro()
		}
		var id any
		if m.MessageID != "" {
			id = m.MessageID
		}
		arr[i] = [8]any{id, m.Topic, key, m.Payload, m.Headers, maxAttempts, m.Delay.Microseconds(), notBefore}
	}
	b, err := json.Marshal(arr)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, stmt, string(b))
	if err != nil && isUniqueViolation(err) {
		ids := make([]string, len(msgs))
		for i, m := range msgs {
			ids[i] = m.MessageID
		}
		return &DuplicateError{MessageIDs: ids}
	}
	return err
}

// settle passes one JSON array of outcomes and the owner.
func (plain) settle(ctx context.Context, q Querier, stmt, owner string, outs []Outcome) (int64, error) {
	arr := make([][6]any, len(outs))
	for i, o := range outs {
		var e any
		if o.Error != "" {
			e = o.Error
		}
		inc, unk := 0, 0
		if o.CountAttempt {
			inc = 1
		}
		if o.Unknown {
			unk = 1
		}
		arr[i] = [6]any{o.ID, o.Status, o.Delay.Microseconds(), e, inc, unk}
	}
	b, err := json.Marshal(arr)
	if err != nil {
		return 0, err
	}
	return q.Exec(ctx, stmt, string(b), owner)
}

// inflightArgs are one JSON array of (partition, max id) pairs and the
// owner.
func (plain) inflightArgs(owner string, parts []int, maxIDs []int64) ([]any, error) {
	arr := make([][2]int64, len(parts))
	for i, p := range parts {
		arr[i] = [2]int64{int64(p), maxIDs[i]}
	}
	b, err := json.Marshal(arr)
	if err != nil {
		return nil, err
	}
	return []any{string(b), owner}, nil
}
