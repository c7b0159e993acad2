package scenario_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/chaos"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/harness"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
)

// TestChaosWritersCommitOutOfIDOrder runs eight writers that each hold
// their transaction open for a random while after inserting, so rows
// commit out of id order — a later id visible to the relay before an
// earlier one — while a relay drains, and a tenth of the transactions
// roll back. Nothing committed may be skipped.
func TestChaosWritersCommitOutOfIDOrder(t *testing.T) {
	scale := chaosScale(t)
	rnd := chaosRand(t)
	eachDriver(t, func(t *testing.T, dc harness.Case, h *harness.Harness, rec *chaos.Recorder) {
		cfg := harness.Config(outbox.Route{Pattern: "*", Publisher: outbox.PublisherFunc(func(_ context.Context, env *outbox.Envelope) error {
			rec.Deliver(env.ID, env.Key)
			return nil
		})})
		r, err := h.NewRelay(cfg)
		if err != nil {
			t.Fatal(err)
		}
		stopRelay := relaytest.Run(t, r)

		var rollbacks atomic.Int64
		ws := startLoops(rnd, 8, func(w int, pr *rand.Rand) error {
			keys := make([]string, 1+pr.IntN(5))
			msgs := make([]outbox.Message, len(keys))
			for i := range keys {
				keys[i] = fmt.Sprintf("w%d-%d", w, pr.IntN(5))
				msgs[i] = outbox.Message{Topic: "chaos.event", Key: keys[i], Payload: []byte(`{}`)}
			}
			rollback := pr.IntN(10) == 0
			ids, err := h.EnqueueHeld(context.Background(), msgs, time.Duration(pr.IntN(20))*time.Millisecond, rollback)
			if err != nil {
				return err
			}
			if rollback {
				rollbacks.Add(1)
				rec.RollBack(ids)
			} else {
				rec.Commit(ids, keys)
			}
			return nil
		})
		run := time.Duration(6*scale) * time.Second // 60 s under make chaos
		time.Sleep(run)
		if err := ws.halt(); err != nil {
			t.Fatalf("writer: %v", err)
		}
		res := chaosResult{scenario: "8 writers committing out of id order", broker: "in-process",
			faults: fmt.Sprintf("%v of writes, %d rollbacks", run, rollbacks.Load()), recovered: time.Now()}
		drainAndCheck(t, h, rec, res, chaos.Bounds{}, 2*time.Minute)
		stopRelay()

		// The scenario only means something if commits did overtake ids.
		rowID := map[string]int64{}
		rows, err := h.DB.SQL.QueryContext(context.Background(), "SELECT "+textID(dc)+", id FROM outbox_messages")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var mid string
			var id int64
			if err := rows.Scan(&mid, &id); err != nil {
				t.Fatal(err)
			}
			rowID[mid] = id
		}
		rows.Close()
		overtaken, highest := 0, int64(0)
		for _, c := range rec.History(nil).Committed {
			id := rowID[c.ID]
			if id < highest {
				overtaken++
			}
			highest = max(highest, id)
		}
		t.Logf("%d of %d committed messages had a lower id than one committed before them", overtaken, len(rowID))
		if overtaken == 0 {
			t.Fatal("no commit overtook another: the scenario proved nothing")
		}
	})
}

func textID(dc harness.Case) string {
	if dc.Dialect == store.Postgres {
		return "message_id::text"
	}
	return "message_id"
}
