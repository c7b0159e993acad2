package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/txoutbox/outbox/admin"
	"github.com/txoutbox/outbox/internal/adopt/adoptstore"
	"github.com/txoutbox/outbox/internal/adopt/adoptyaml"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/adopttest"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// newAdoptedAdmin serves an admin Server over the table of profile (a
// built-in name or a mapping file) in db.
func newAdoptedAdmin(t *testing.T, db *testdb.DB, profile string) *httptest.Server {
	t.Helper()
	cfg := &admin.Config{Tokens: []admin.Token{{Name: "ops", Secret: opsToken}}, Logger: relaytest.Logger()}
	var srv *admin.Server
	p, err := adoptyaml.Load(profile)
	if err != nil {
		t.Fatal(err)
	}
	if db.PGX != nil {
		srv, err = admin.New(store.Adopting(db.PGX, p), cfg)
	} else {
		srv, err = admin.New(store.Adopting(db.Std, p), cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts
}

// TestAdoptedTable: over the Laravel table (no message id column) the
// counts follow the profile (a failed row with retries left is pending,
// one with none is dead), rows are found by their derived message ids,
// requeue moves a dead row back to "pending" with its retries reset and
// refuses a row that is not dead, and the changes the table does not take
// answer 501.
func TestAdoptedTable(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *testdb.DB) {
		adopttest.Create(t, db, "laravel")
		for _, r := range []struct {
			topic, status string
			retries       int
		}{{"order.created", "pending", 0}, {"order.created", "sent", 0}, {"order.paid", "failed", 3}, {"order.paid", "failed", 1}} {
			db.Exec(t, testdb.Placeholder(db.Dialect, "INSERT INTO local_messages (topic, payload, status, retry_times, max_retry_times, created_at) VALUES (?, '{}', ?, ?, 3, "+adopttest.NowSQL(db.Dialect)+")"),
				r.topic, r.status, r.retries)
		}
		deadRow := int64(db.Count(t, "SELECT id FROM local_messages WHERE retry_times = 3"))
		deadID := adoptstore.DerivedMessageID("local_messages", deadRow)
		ts := newAdoptedAdmin(t, db, "laravel")
		// A relay of the table, and one of outbox_messages, registered.
		p, err := adoptyaml.Load("laravel")
		if err != nil {
			t.Fatal(err)
		}
		a, err := adoptstore.New(db.Backend().Store, p)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := a.Heartbeat(ctx, "table-relay", store.EncodeRoutes([]string{"order.*"}), time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := a.RecordWake(ctx, "table-relay", "probe 25ms"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Backend().Store.Heartbeat(ctx, "outbox-relay", store.EncodeRoutes(nil), time.Minute); err != nil {
			t.Fatal(err)
		}

		var st struct {
			Pending, Sent, Consumed, Dead int64
			Table                         struct {
				States []struct {
					State string
					Count int64
				}
			}
			Relays []struct{ ID, Table, Wake string }
		}
		call(t, ts, "GET", "/api/v1/stats", opsToken, nil).want(t, 200).decode(t, &st)
		if st.Pending != 2 || st.Sent != 1 || st.Consumed != 0 || st.Dead != 1 || fmt.Sprint(st.Table.States) != "[{failed 2} {pending 1} {sent 1}]" {
			t.Errorf("stats: %+v", st)
		}
		if fmt.Sprint(st.Relays) != "[{table-relay local_messages probe 25ms}]" {
			t.Errorf("stats relays: %+v, want the table's relay alone", st.Relays)
		}
		var list struct {
			Messages []struct {
				ID                         int64
				MessageID                  string `json:"message_id"`
				Status, Topic, TableStatus string
			}
		}
		call(t, ts, "GET", "/api/v1/messages?status=dead", opsToken, nil).want(t, 200).decode(t, &list)
		if len(list.Messages) != 1 || list.Messages[0].MessageID != deadID || list.Messages[0].Topic != "order.paid" {
			t.Errorf("dead list: %+v, want %s", list.Messages, deadID)
		}
		call(t, ts, "GET", "/api/v1/messages?id="+deadID, opsToken, nil).want(t, 200).decode(t, &list)
		if len(list.Messages) != 1 || list.Messages[0].ID != deadRow {
			t.Errorf("search by derived id: %+v", list.Messages)
		}
		call(t, ts, "GET", "/api/v1/messages?status=pending&limit=1", opsToken, nil).want(t, 200).decode(t, &list)
		if len(list.Messages) != 1 || list.Messages[0].Status != "pending" || list.Messages[0].Topic != "order.paid" {
			t.Errorf("newest pending: %+v", list.Messages)
		}
		call(t, ts, "GET", "/api/v1/messages?since=2000-01-01T00:00:00Z", opsToken, nil).want(t, 200).decode(t, &list)
		if len(list.Messages) != 4 {
			t.Errorf("since 2000: %d rows, want 4", len(list.Messages))
		}
		call(t, ts, "GET", "/api/v1/messages?until=2000-01-01T00:00:00Z", opsToken, nil).want(t, 200).decode(t, &list)
		if len(list.Messages) != 0 {
			t.Errorf("until 2000: %d rows, want none", len(list.Messages))
		}
		var one struct{ Status, Topic string }
		call(t, ts, "GET", "/api/v1/messages/"+deadID, opsToken, nil).want(t, 200).decode(t, &one)
		if one.Status != "dead" || one.Topic != "order.paid" {
			t.Errorf("detail: %+v", one)
		}
		call(t, ts, "GET", "/api/v1/messages/"+adoptstore.DerivedMessageID("local_messages", 999999), opsToken, nil).wantError(t, 404, "no message")
		call(t, ts, "GET", "/api/v1/messages/row-1", opsToken, nil).wantError(t, 400, "not a UUID")

		call(t, ts, "DELETE", "/api/v1/messages/"+deadID, opsToken, nil).wantError(t, http.StatusNotImplemented, "discarding", "adopted table local_messages (profile laravel)")
		call(t, ts, "POST", "/api/v1/messages/requeue", opsToken, map[string]any{"all": true}).wantError(t, http.StatusNotImplemented, "bulk requeue")
		call(t, ts, "POST", "/api/v1/messages/"+deadID+"/requeue", "", nil).wantError(t, 401, "missing Authorization")
		call(t, ts, "POST", "/api/v1/messages/"+deadID+"/requeue", opsToken, nil).want(t, 200)
		if n := db.Count(t, testdb.Placeholder(db.Dialect, "SELECT count(*) FROM local_messages WHERE id = ? AND status = 'pending' AND retry_times = 0 AND next_retry_at IS NULL"), deadRow); n != 1 {
			t.Error("the requeued row is not pending with its retries reset")
		}
		call(t, ts, "POST", "/api/v1/messages/"+deadID+"/requeue", opsToken, nil).wantError(t, 409, "is pending", "only dead rows")
		call(t, ts, "GET", "/api/v1/stats", opsToken, nil).want(t, 200).decode(t, &st)
		if st.Pending != 3 || st.Dead != 0 {
			t.Errorf("stats after the requeue: %+v", st)
		}
	})
}

// TestAdoptedTableWithoutCreatedAt: a mapping without a created-at column
// refuses a search by creation time with 400, and its rows are found by
// the text of their message id column.
func TestAdoptedTableWithoutCreatedAt(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	db.Exec(t, "CREATE TABLE events (id INTEGER PRIMARY KEY, ref TEXT, body TEXT, state TEXT, tries INTEGER, due_at TEXT)")
	db.Exec(t, "INSERT INTO events (ref, body, state, tries) VALUES ('evt/1', '{}', 'dead', 5)")
	mapping := filepath.Join(t.TempDir(), "events.yaml")
	if err := os.WriteFile(mapping, []byte("table: events\ntopic: events.out\ncolumns: {id: id, message_id: ref, payload: body, status: state, attempts: tries, next_attempt: due_at}\nstatus: {pending: new, sent: done, failed: retry, dead: dead}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := newAdoptedAdmin(t, db, mapping)
	call(t, ts, "GET", "/api/v1/messages?since=2026-01-01T00:00:00Z", opsToken, nil).wantError(t, 400, "created-at column")
	var one struct{ Status, Topic string }
	call(t, ts, "GET", "/api/v1/messages/evt%2F1", opsToken, nil).want(t, 200).decode(t, &one)
	if one.Status != "dead" || one.Topic != "events.out" {
		t.Errorf("detail: %+v", one)
	}
	call(t, ts, "POST", "/api/v1/messages/evt%2F1/requeue", opsToken, nil).want(t, 200)
	if n := db.Count(t, "SELECT count(*) FROM events WHERE state = 'new' AND tries = 0"); n != 1 {
		t.Error("the requeued row is not new with its attempts reset")
	}
}
