package admin_test

import (
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestDeadMessagesSayWhenTheyDied: a dead message's died_at is the time
// of death the settle records in available_at; other messages have none.
func TestDeadMessagesSayWhenTheyDied(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	db.Exec(t, `INSERT INTO outbox_messages (topic, payload, status, created_at, available_at) VALUES
		('order.dead', '{}', 'dead', '2025-01-31 10:00:00.000', '2025-01-31 11:30:00.000'),
		('order.pending', '{}', 'pending', '2025-01-31 10:00:00.000', '2025-01-31 11:30:00.000')`)
	ts := newAdmin(t, db, nil)
	var res struct {
		Messages []struct {
			Topic  string     `json:"topic"`
			DiedAt *time.Time `json:"died_at"`
		} `json:"messages"`
	}
	call(t, ts, "GET", "/api/v1/messages", opsToken, nil).want(t, 200).decode(t, &res)
	if len(res.Messages) != 2 {
		t.Fatalf("listed %d messages, want 2", len(res.Messages))
	}
	for _, m := range res.Messages {
		switch {
		case m.Topic == "order.dead" && (m.DiedAt == nil || m.DiedAt.Sub(time.Date(2025, 1, 31, 11, 30, 0, 0, time.UTC)).Abs() > time.Millisecond):
			t.Errorf("dead message: died_at %v, want its available_at, 2025-01-31T11:30:00Z", m.DiedAt)
		case m.Topic == "order.pending" && m.DiedAt != nil:
			t.Errorf("pending message: died_at %v, want none", m.DiedAt)
		}
	}
}
