package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/txoutbox/outbox/internal/adopt/adoptstore"
	"github.com/txoutbox/outbox/internal/store"
)

// source is what the server reads and changes: the store over
// outbox_messages or over an adopted table.
type source interface {
	Now(ctx context.Context) (time.Time, error)
	Gauges(ctx context.Context) (store.GaugeSample, error)
	Stats(ctx context.Context) (store.Stats, error)
	RouteHealth(ctx context.Context) ([]store.RouteHealth, error)
	Search(ctx context.Context, s store.Search) ([]store.Record, error)
	Get(ctx context.Context, id string) (store.Record, error)
	RequeueOne(ctx context.Context, id string) error
	InsertAudit(ctx context.Context, e store.AuditEntry) error
	Audit(ctx context.Context, limit int) ([]store.AuditEntry, error)
}

var (
	_ source = (*store.Store)(nil)
	_ source = (*adoptstore.Store)(nil)
)

// tableJSON is an adopted table in GET /api/v1/stats: its name, the
// profile that maps it, and its rows by the table's own status values.
type tableJSON struct {
	Name    string           `json:"name"`
	Profile string           `json:"profile"`
	States  []tableStateJSON `json:"states"`
	// Refused names the changes the table does not take.
	Refused []string `json:"refused"`
}

type tableStateJSON struct {
	State string `json:"state"`
	Count int64  `json:"count"`
}

// refusedOnAdopted are the changes an adopted table does not take: its
// application owns its rows, so only dead rows go back to be retried.
var refusedOnAdopted = []string{"discard", "consumed", "replay", "bulk"}

// tableStats is the stats' table object: nil on outbox_messages.
func (s *Server) tableStats(ctx context.Context) (*tableJSON, error) {
	if s.adopted == nil {
		return nil, nil
	}
	counts, err := s.adopted.StateCounts(ctx)
	if err != nil {
		return nil, err
	}
	p := s.adopted.Profile()
	t := &tableJSON{Name: p.Table, Profile: p.Name, States: make([]tableStateJSON, 0, len(counts)), Refused: refusedOnAdopted}
	for _, c := range counts {
		t.States = append(t.States, tableStateJSON(c))
	}
	return t, nil
}

// refuse answers 501 and returns true when the server shows an adopted
// table, which does not take the change what.
func (s *Server) refuse(w http.ResponseWriter, what string) bool {
	if s.adopted == nil {
		return false
	}
	p := s.adopted.Profile()
	writeError(w, http.StatusNotImplemented, fmt.Sprintf("%s is not available on the adopted table %s (profile %s): its application owns its rows; only POST /api/v1/messages/{id}/requeue of a dead row works", what, p.Table, p.Name))
	return true
}

// parseID checks a message id: a UUID on outbox_messages; on an adopted
// table with a message id column, any text of that column.
func (s *Server) parseID(v string) (string, error) {
	if s.adopted == nil || s.adopted.Profile().MessageID == "" {
		return parseMessageID(v)
	}
	switch {
	case v == "":
		return "", errors.New("empty message id")
	case !utf8.ValidString(v) || utf8.RuneCountInString(v) > maxTextLen:
		return "", fmt.Errorf("message id is not UTF-8 text of at most %d characters", maxTextLen)
	}
	return v, nil
}

// adoptedSearch refuses what a search of an adopted table cannot do.
func (s *Server) adoptedSearch(q store.Search) error {
	if s.adopted == nil {
		return nil
	}
	p := s.adopted.Profile()
	if p.CreatedAt == "" && (!q.Since.IsZero() || !q.Until.IsZero()) {
		return fmt.Errorf("since and until need a created-at column, which profile %s does not map on %s", p.Name, p.Table)
	}
	return nil
}
