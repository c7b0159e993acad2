package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/syncbuf"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestEnqueueClaimCheck: with --claim-check, a payload over
// --claim-threshold goes to the store and the row holds an empty payload
// and the reference; a relay with the same store delivers the payload.
// OUTBOX_CLAIM_CHECK_DIR serves enqueue as it serves the relay, with the
// library's threshold and limit for claim-checked payloads.
func TestEnqueueClaimCheck(t *testing.T) {
	t.Parallel()
	forDialects(t, func(t *testing.T, d store.Dialect) {
		ctx := context.Background()
		db := testdb.New(t, d)
		vars := dbVars(db)
		dir := filepath.Join(t.TempDir(), "blobs")
		payload := `{"doc":"` + strings.Repeat("x", 2000) + `"}`
		claimed := enqueueOK(t, vars, "--topic", "doc.scanned", "--payload", payload, "--claim-check", dir, "--claim-threshold", "1000")
		inline := enqueueOK(t, vars, "--topic", "doc.scanned", "--payload", `{"n":1}`, "--claim-check", dir, "--claim-threshold", "1000")

		blobs, err := claimcheck.OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		rows := map[string]store.Message{}
		msgs, err := db.Store().List(ctx, store.Filter{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			rows[m.MessageID] = m
		}
		ref := refOf(t, rows[claimed].Headers)
		if rows[claimed].Payload != "" || ref.Scheme != "file" || ref.Size != int64(len(payload)) {
			t.Fatalf("claim-checked row: payload %.40q, reference %+v", rows[claimed].Payload, ref)
		}
		if id, _ := claimcheck.MessageID(ref.Key); id != claimed {
			t.Errorf("blob key %s is not of message %s", ref.Key, claimed)
		}
		if _, err := os.Stat(filepath.Join(dir, ref.Key)); err != nil {
			t.Fatalf("blob file: %v", err)
		}
		if blob, err := claimcheck.Fetch(ctx, blobs, ref); err != nil || string(blob) != payload {
			t.Fatalf("claimcheck.Fetch: %v, %d bytes", err, len(blob))
		}
		if m := rows[inline]; m.Payload != `{"n":1}` || strings.Contains(m.Headers, claimcheck.HeaderRef) {
			t.Errorf("a payload under the threshold: %+v", m)
		}

		// A relay with the store (here from OUTBOX_CLAIM_CHECK_DIR)
		// publishes the payload itself.
		relayVars := map[string]string{"OUTBOX_DATABASE_URL": db.URL, "OUTBOX_CLAIM_CHECK_DIR": dir}
		var stdout, stderr syncbuf.Buffer
		stop := startRelay(t, relayVars, &stdout, &stderr, "--to", "stdout://", "--lease-ttl", "1s")
		waitFor(t, "both messages sent", func() bool {
			st, err := db.Store().Stats(ctx)
			return err == nil && st.Sent == 2
		})
		if code := stop(); code != 0 {
			t.Fatalf("relay exit %d\nstderr: %s", code, stderr.String())
		}
		sc := bufio.NewScanner(strings.NewReader(stdout.String()))
		sc.Buffer(nil, 1<<20)
		found := false
		for sc.Scan() {
			var line struct {
				MessageID string            `json:"message_id"`
				Headers   map[string]string `json:"headers"`
				Payload   json.RawMessage   `json:"payload"`
			}
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Fatalf("stdout line: %v", err)
			}
			if line.MessageID != claimed {
				continue
			}
			found = true
			var compact bytes.Buffer
			_ = json.Compact(&compact, line.Payload)
			if compact.String() != payload || line.Headers[claimcheck.HeaderRef] != "" {
				t.Errorf("delivered: headers %v, payload %.60s", line.Headers, line.Payload)
			}
		}
		if !found {
			t.Fatalf("the claim-checked message is not on stdout:\n%.2000s", stdout.String())
		}

		// OUTBOX_CLAIM_CHECK_DIR alone, the default threshold (256 KiB):
		// a payload of 2 MiB, over the 1 MiB limit of the row, goes to
		// the store.
		big := `"` + strings.Repeat("y", 2<<20) + `"`
		id := enqueueOK(t, relayVars, "--topic", "doc.large", "--payload-file", writeFile(t, "big.json", big))
		m, err := db.Store().Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		ref = refOf(t, m.Headers)
		if blob, err := claimcheck.Fetch(ctx, blobs, ref); err != nil || string(blob) != big || m.Payload != "" {
			t.Fatalf("a 2 MiB payload: %v, blob %d bytes, row payload %d bytes", err, len(blob), len(m.Payload))
		}
	})
}

// refOf is the claim-check reference in the headers JSON.
func refOf(t *testing.T, headers string) claimcheck.Ref {
	t.Helper()
	h := map[string]string{}
	if err := json.Unmarshal([]byte(headers), &h); err != nil {
		t.Fatalf("headers %q: %v", headers, err)
	}
	ref, ok, err := claimcheck.ParseHeaders(h)
	if !ok || err != nil {
		t.Fatalf("no reference in %v: %v", h, err)
	}
	return ref
}

// TestEnqueueClaimCheckUsage: a store that cannot be opened and bad
// thresholds are usage errors naming the flag, and write nothing; the
// config's claim_check serves enqueue too.
func TestEnqueueClaimCheckUsage(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	vars := dbVars(db)
	file := writeFile(t, "not-a-dir", "x")
	args := func(extra ...string) []string {
		return append([]string{"enqueue", "--topic", "doc.scanned", "--payload", `{"n":1234567890}`}, extra...)
	}
	run(t, vars, args("--claim-check", file)...).failed(t, ExitUsage, "enqueue: --claim-check: ", "not a directory")
	run(t, vars, args("--claim-check", filepath.Join(file, "blobs"))...).failed(t, ExitUsage, "enqueue: --claim-check: ")
	run(t, map[string]string{"OUTBOX_DATABASE_URL": db.URL, "OUTBOX_CLAIM_CHECK_DIR": file}, args()...).failed(t, ExitUsage, "--claim-check", "not a directory")
	run(t, vars, args("--claim-check", "gs://bucket/blobs")...).failed(t, ExitUsage, `--claim-check: scheme "gs" is not a blob store this program serves`)
	run(t, vars, args("--claim-check", "")...).failed(t, ExitUsage, "--claim-check: empty")
	run(t, vars, args("--claim-check", t.TempDir(), "--claim-threshold", "0")...).failed(t, ExitUsage, "--claim-threshold must be at least 1 byte")
	run(t, vars, args("--claim-check", t.TempDir(), "--claim-threshold", "-5")...).failed(t, ExitUsage, "--claim-threshold must be at least 1 byte")
	run(t, vars, args("--claim-check", t.TempDir(), "--claim-threshold", "1k")...).failed(t, ExitUsage, "--claim-threshold")
	run(t, vars, args("--claim-threshold", "10")...).failed(t, ExitUsage, "--claim-threshold needs a claim-check store")
	if n := db.Count(t, "SELECT count(*) FROM outbox_messages"); n != 0 {
		t.Fatalf("%d rows after rejected enqueues", n)
	}

	dir := filepath.Join(t.TempDir(), "blobs")
	cfg := writeFile(t, "outbox.yaml", "database: "+db.URL+"\nclaim_check: "+dir+"\n")
	id := enqueueOK(t, nil, append(args("--claim-threshold", "10"), "--config", cfg)[1:]...)
	m, err := db.Store().Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if ref := refOf(t, m.Headers); m.Payload != "" || ref.Key == "" {
		t.Fatalf("the config's claim_check: %+v", m)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 1 {
		t.Fatalf("blobs in the config's directory: %v, %v", entries, err)
	}
}
