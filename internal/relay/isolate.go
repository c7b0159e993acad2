package relay

import (
	"context"
	"slices"
	"strconv"

	"github.com/txoutbox/outbox/internal/msgcheck"
	"github.com/txoutbox/outbox/internal/store"
)

// Crash isolation.
//
// A message whose decoding or publish kills the relay process outright (a
// fatal runtime error, running out of memory, a publisher that exits)
// cannot be failed by the relay: the process is gone before the settle,
// and every relay that reads the message next dies the same way. Panics
// while a message is prepared or published are recovered
// (prepareContained, publishContained); this handles what no recover can.
//
// Every round records the highest id it is about to publish in the leases
// of its partitions, with its read (Store.ReadMark) or, while isolating,
// exactly (markInflight). A relay that gains a partition whose
// lease still carries such a mark knows its previous holder stopped in
// the middle of a round, and treats the partition's pending rows up to the
// mark as suspects:
//
//   - a batch holding suspects is cut down to the first half of them, so
//     each further crash at least halves the group the culprit hides in,
//     and suspects that publish fine are settled and leave the group;
//   - a suspect published alone has its attempt recorded before it is
//     prepared and published (an attempt of unknown outcome): a message
//     that kills the relay every time, while it is decoded or published,
//     runs out of attempts and goes dead after max_attempts crashes
//     instead of taking relays down forever.
//
// The innocent messages of a crashed batch are published again, which
// at-least-once delivery allows, and are charged an attempt only if they
// happen to be published alone.

// errRelayStopped is the reason recorded with a suspect's charged attempt.
const errRelayStopped = "the relay stopped while publishing it (crash, kill or lost lease)"

// isolate returns the part of a freshly read batch to publish this round,
// whether that part is suspects and whether it is a single suspect.
//
// Rounds publishing suspects run one at a time in a process (the caller
// holds Relay.isolating), so when the relay dies the suspects in flight
// are one group: a suspect published alone that is innocent is not
// charged again for a crash another worker's suspects caused, and an
// innocent can never run out of attempts in lockstep with the culprit.
func (r *Relay) isolate(rows []store.Row) (out []store.Row, suspects, alone bool) {
	marks := r.own.suspects()
	if marks == nil {
		return rows, false, false
	}
	var sus []store.Row
	for _, row := range rows {
		// A row of the snapshot domain was never read by the relay that
		// stopped: what it may have been publishing was moved to the
		// table domain (see snapState).
		if !row.Snapshot && row.ID <= marks[row.Partition] {
			sus = append(sus, row)
		}
	}
	if len(sus) == 0 {
		return rows, false, false
	}
	// Rows are in id order and a key lives in one partition, so a key's
	// suspects come before its other rows: taking the first suspects
	// keeps every key's order.
	sus = sus[:(len(sus)+1)/2]
	return sus, true, len(sus) == 1
}

// charge records the attempt of a suspect about to be prepared and
// published alone, and returns its item, to be prepared. It reports false
// when the message is no longer this relay's to publish. A suspect with no
// attempt left is decided dead without being prepared or published.
func (r *Relay) charge(ctx context.Context, row *store.Row) (*item, bool, error) {
	normalizeCounts(row)
	it := &item{row: row, charged: true}
	if row.Attempts >= row.MaxAttempts {
		it.decided = true
		if msgcheck.Topic(row.Topic) {
			it.route = r.router.lookup(row.Topic) // for its metrics and log
		}
		it.out = store.Outcome{ID: row.ID, Status: store.StatusDead,
			Error: "max attempts (" + strconv.Itoa(row.MaxAttempts) + ") reached: " + errRelayStopped}
		return it, true, nil
	}
	n, err := r.settle(ctx, []store.Outcome{{ID: row.ID, Status: store.StatusPending, Error: errRelayStopped, CountAttempt: true, Unknown: true, Partition: row.Partition}})
	if err != nil || n == 0 {
		return nil, false, err
	}
	row.Attempts++
	r.log.Warn("outbox relay: publishing alone a message that was in flight when a relay stopped", "relay", r.id,
		"message_id", row.MessageID, "attempt", row.Attempts, "max_attempts", row.MaxAttempts)
	return it, true, nil
}

// suspectsLeft is a Store that tells which partitions still hold a
// suspect of a takeover (store.Store.SuspectsLeft).
type suspectsLeft interface {
	SuspectsLeft(ctx context.Context, marks map[int]int64) ([]int, error)
}

// forgetSettledSuspects drops the marks of partitions none of whose
// suspects is pending any more. While a partition keeps a mark, every
// round reads and marks separately (see readRound): once its suspects
// are all settled, the rounds go back to the single read. A mark whose
// check fails is kept, to be checked at the next tick.
func (r *Relay) forgetSettledSuspects(ctx context.Context) {
	sl, ok := r.store.(suspectsLeft)
	marks := r.own.suspects()
	if !ok || marks == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, r.statementTimeout())
	defer cancel()
	left, err := sl.SuspectsLeft(ctx, marks)
	if err != nil {
		return
	}
	var done []int
	r.own.mu.Lock()
	for p, mark := range marks {
		if !slices.Contains(left, p) && r.own.suspect[p] == mark {
			delete(r.own.suspect, p)
			done = append(done, p)
		}
	}
	r.own.mu.Unlock()
	if len(done) > 0 {
		slices.Sort(done)
		r.log.Info("outbox relay: the messages in flight when a relay stopped are settled", "relay", r.id, "partitions", done)
	}
}
