package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/seal"
)

// TestProduceSealAndClaim: outbox+seal and outbox+claim run when named,
// get their ratios against business and outbox, and write what they say:
// sealed rows, and blobs with rows that reference them.
func TestProduceSealAndClaim(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			url := sqliteURL(t)
			if d != store.SQLite {
				url = testdb.New(t, d).URL
			}
			produceSealAndClaim(t, url)
		})
	}
}

func produceSealAndClaim(t *testing.T, url string) {
	// 70,000 bytes: more than a MySQL TEXT column holds.
	r := mustJSON(t, "produce", "--db", url, "--clients", "1,2", "--duration", "200ms", "--payload-bytes", "70000",
		"--variants", "business,outbox,outbox+seal,outbox+claim")
	want := []string{vBusiness, vOutbox, vSeal, vClaim}
	for _, run := range r.Produce.Runs {
		if len(run.Variants) != len(want) {
			t.Fatalf("%d clients: variants %+v, want %v", run.Clients, run.Variants, want)
		}
		for i, v := range run.Variants {
			if v.Variant != want[i] || v.Transactions <= 0 || v.VsBusiness <= 0 {
				t.Errorf("%d clients: variant %+v", run.Clients, v)
			}
			if (v.Variant == vSeal || v.Variant == vClaim) != (v.VsOutbox > 0) {
				t.Errorf("%d clients: %s vs outbox %.2f", run.Clients, v.Variant, v.VsOutbox)
			}
		}
	}
	assertClean(t, url)

	code, out, errOut := benchRun(t, "produce", "--db", url, "--clients", "1", "--duration", "100ms", "--variants", "business,outbox,outbox+seal")
	if code != 0 || !strings.Contains(out, "outbox+seal/business at 1 clients: ") || !strings.Contains(out, "(outbox+seal/outbox: ") {
		t.Errorf("table: exit %d\n%s\n%s", code, out, errOut)
	}

	// What each variant writes, looked at before the run removes it.
	ctx := context.Background()
	o := &options{workload: wProduce, dbURL: url, payloadBytes: 300, keys: 3, clientList: []int{1},
		duration: 100 * time.Millisecond, variants: vSeal + "," + vClaim}
	b, err := open(ctx, o, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.close(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(b.claimDir); !os.IsNotExist(err) {
			t.Errorf("the claim-check directory %s is still there: %v", b.claimDir, err)
		}
		assertClean(t, url)
	}()
	if err := b.conn.migrate(ctx); err != nil {
		t.Fatal(err)
	}
	b.migrated = true
	if err := b.createTable(ctx); err != nil {
		t.Fatal(err)
	}
	vs, _, err := b.chosenVariants()
	if err != nil || len(vs) != 2 {
		t.Fatalf("variants %+v, %v", vs, err)
	}
	if err := b.prepareEnqueuers(vs); err != nil {
		t.Fatal(err)
	}
	blobs, err := claimcheck.OpenDir(b.claimDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		topic := b.topic(strings.TrimPrefix(v.name, "outbox+"))
		vr, err := b.produceVariant(ctx, topic, 1, v)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := b.q.Query(ctx, "SELECT payload, headers FROM outbox_messages WHERE topic = "+b.ph(1), topic)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for rows.Next() {
			var payload, hj string
			if err := rows.Scan(&payload, &hj); err != nil {
				t.Fatal(err)
			}
			n++
			h := map[string]string{}
			if err := json.Unmarshal([]byte(hj), &h); err != nil {
				t.Fatalf("headers %q: %v", hj, err)
			}
			switch v.name {
			case vSeal:
				if h[seal.HeaderAlgorithm] != string(seal.AES256GCM) || h[seal.HeaderKeyID] != "bench-"+b.runID ||
					payload == "" || strings.Contains(payload, "order_id") {
					t.Fatalf("%s: a row not sealed: headers %v, payload %.40q", v.name, h, payload)
				}
			case vClaim:
				ref, ok, err := claimcheck.ParseHeaders(h)
				if !ok || err != nil || payload != "" {
					t.Fatalf("%s: a row without its reference: headers %v, payload %.40q, %v", v.name, h, payload, err)
				}
				blob, err := claimcheck.Fetch(ctx, blobs, ref)
				if err != nil || !bytes.Equal(blob, b.payload) {
					t.Fatalf("%s: blob %s: %v", v.name, ref.Key, err)
				}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if n == 0 || n != vr.Transactions {
			t.Errorf("%s: %d rows, %d transactions", v.name, n, vr.Transactions)
		}
		if v.claim {
			entries, err := os.ReadDir(b.claimDir)
			if err != nil || int64(len(entries)) != n {
				t.Errorf("%s: %d blobs for %d rows: %v", v.name, len(entries), n, err)
			}
		}
	}
}
