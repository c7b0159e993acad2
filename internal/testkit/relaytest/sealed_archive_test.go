package relaytest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/seal"
)

// archivedRow is a row of outbox_messages_archive.
type archivedRow struct {
	headers map[string]string
	payload []byte
}

// archivedRows reads outbox_messages_archive by message id.
func archivedRows(t *testing.T, db *testdb.DB) map[string]archivedRow {
	t.Helper()
	rows, err := db.SQL.QueryContext(context.Background(), "SELECT message_id, headers, payload FROM outbox_messages_archive")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	out := map[string]archivedRow{}
	for rows.Next() {
		var id, headers, payload string
		if err := rows.Scan(&id, &headers, &payload); err != nil {
			t.Fatal(err)
		}
		r := archivedRow{headers: map[string]string{}, payload: []byte(payload)}
		if err := json.Unmarshal([]byte(headers), &r.headers); err != nil {
			t.Fatalf("archived headers %q: %v", headers, err)
		}
		out[id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSealedErasureArchived: on every database, sealed messages that
// retention archived after delivery (RetentionConfig.Archive) stay sealed
// in outbox_messages_archive; once a data subject's key is erased from
// the key file, that subject's archived payloads no longer open
// (seal.OpenPayload and seal.OpenMessage report seal.ErrErased, with the
// relay's own key provider and with a fresh one), while the other
// subject's and the default key's archived payloads still open to their
// plain text.
func TestSealedErasureArchived(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testdb.New(t, d)
			keys := keyFile(t)
			cfg := &outbox.Config{Seal: &outbox.SealConfig{Keys: keys, Headers: []string{"x-email"}}}
			plain := map[string][]byte{}
			var msgs []outbox.Message
			for _, m := range []struct{ subject, email, body string }{
				{"customer:1", "ann@example.com", `{"email":"ann@example.com"}`},
				{"customer:1", "ann@example.com", `{"email":"ann@example.com","order":2}`},
				{"customer:2", "bea@example.com", `{"email":"bea@example.com"}`},
				{"", "cy@example.com", `{"email":"cy@example.com"}`},
			} {
				msgs = append(msgs, outbox.Message{Topic: "archive.x", Payload: []byte(m.body), SealSubject: m.subject,
					Headers: map[string]string{"x-email": m.email}})
			}
			ids := produce(t, db, cfg, msgs...)
			for i, id := range ids {
				plain[id] = msgs[i].Payload
			}
			erased, kept := ids[:2], ids[2:]

			rec := newRecorder()
			rc := relaytest.Config(rec)
			rc.Keys = keys
			rc.Retention = &outbox.RetentionConfig{Sent: time.Millisecond, Interval: 20 * time.Millisecond, Archive: true}
			relaytest.Start(t, db, rc)
			relaytest.WaitFor(t, 30*time.Second, "all four delivered and archived", func() bool {
				return db.Count(t, "SELECT count(*) FROM outbox_messages_archive") == 4 && db.Count(t, "SELECT count(*) FROM outbox_messages") == 0
			})
			for _, id := range ids {
				if e, ok := rec.envelope(id); !ok || !bytes.Equal(e.Payload, plain[id]) {
					t.Errorf("%s delivered as %q, want %q", id, e.Payload, plain[id])
				}
			}

			archived := archivedRows(t, db)
			for _, id := range ids {
				r, ok := archived[id]
				switch {
				case !ok:
					t.Fatalf("%s is not in the archive", id)
				case bytes.Contains(r.payload, []byte("example.com")) || strings.Contains(r.headers["x-email"], "example.com"):
					t.Errorf("%s is archived in plain text: %q %v", id, r.payload, r.headers)
				}
				if _, _, sealed := seal.Sealed(r.headers); !sealed {
					t.Errorf("%s is archived without its seal headers: %v", id, r.headers)
				}
				// Before the erasure every archived row opens.
				if got, err := seal.OpenPayload(ctx, keys, id, r.headers, r.payload); err != nil || !bytes.Equal(got, plain[id]) {
					t.Fatalf("%s before the erasure: %q, %v", id, got, err)
				}
			}

			before, err := os.ReadFile(keys.Path())
			if err != nil {
				t.Fatal(err)
			}
			secret := subjectSecret(t, before, "customer:1")
			if err := seal.EraseKey(keys.Path(), "customer:1"); err != nil {
				t.Fatal(err)
			}
			after, err := os.ReadFile(keys.Path())
			if err != nil {
				t.Fatal(err)
			}
			if secret == "" || bytes.Contains(after, []byte(secret)) {
				t.Fatalf("the key file still holds customer:1's secret after the erasure")
			}

			fresh, err := seal.OpenFileKeys(keys.Path())
			if err != nil {
				t.Fatal(err)
			}
			archived = archivedRows(t, db) // the erasure changes no row
			if len(archived) != 4 {
				t.Fatalf("%d archived rows after the erasure, want 4", len(archived))
			}
			for name, kp := range map[string]seal.KeyProvider{"the relay's keys": keys, "a fresh key file": fresh} {
				for _, id := range erased {
					r := archived[id]
					if got, err := seal.OpenPayload(ctx, kp, id, r.headers, r.payload); !errors.Is(err, seal.ErrErased) || got != nil {
						t.Errorf("%s: customer:1's archived %s opened after the erasure: %q, %v (want seal.ErrErased)", name, id, got, err)
					}
					if got, hidden, err := seal.OpenMessage(ctx, kp, id, r.headers, r.payload); !errors.Is(err, seal.ErrErased) || got != nil || hidden != nil {
						t.Errorf("%s: OpenMessage of customer:1's archived %s: %q %v, %v (want seal.ErrErased)", name, id, got, hidden, err)
					}
				}
				for _, id := range kept {
					r := archived[id]
					got, hidden, err := seal.OpenMessage(ctx, kp, id, r.headers, r.payload)
					if err != nil || !bytes.Equal(got, plain[id]) || !strings.HasSuffix(hidden["x-email"], "@example.com") {
						t.Errorf("%s: archived %s (key %s) after the erasure: %q %v, %v", name, id, r.headers[seal.HeaderKeyID], got, hidden, err)
					}
				}
			}
		})
	}
}

// subjectSecret is the secret of key id in a key file's JSON, "" when it
// has none.
func subjectSecret(t *testing.T, file []byte, id string) string {
	t.Helper()
	var doc struct {
		Keys []struct {
			ID     string `json:"id"`
			Secret string `json:"secret"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(file, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range doc.Keys {
		if k.ID == id {
			return k.Secret
		}
	}
	return ""
}
