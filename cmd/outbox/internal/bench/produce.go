package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/seal"
)

// Produce variants.
const (
	vBusiness  = "business"
	vOutbox    = "outbox"
	vNotify    = "outbox+notify"
	vRowNotify = "outbox+row-notify"
	vBatch     = "outbox-batch"
	vSeal      = "outbox+seal"
	vClaim     = "outbox+claim"
)

// variant is one kind of producer transaction.
type variant struct {
	name      string
	enqueue   bool
	notify    bool // the producer's coalesced wake-up, after commit
	rowNotify bool // SELECT pg_notify in the transaction
	batch     bool // the business row and the enqueue in one pgx batch
	seal      bool // Config.Seal: the payload sealed, AES-256-GCM
	claim     bool // Config.ClaimCheck: the payload in a blob directory
	// named: run only when --variants names it.
	named bool
}

// batchTx is a transaction that sends a statement and an enqueue in one
// round trip (pgx: Batched).
type batchTx interface {
	execEnqueue(ctx context.Context, msgs []outbox.Message, sql string, args ...any) error
}

type produceResult struct {
	Runs []produceRun `json:"runs"`
	// Skipped names variants that do not apply to the database.
	Skipped []string `json:"skipped,omitempty"`
}

type produceRun struct {
	Clients  int             `json:"clients"`
	Variants []variantResult `json:"variants"`
	// OutboxVsBusiness is outbox tx/s over business tx/s.
	OutboxVsBusiness float64 `json:"outbox_vs_business"`
}

type variantResult struct {
	Variant      string  `json:"variant"`
	Transactions int64   `json:"transactions"`
	Seconds      float64 `json:"seconds"`
	TxPerSecond  float64 `json:"tx_per_second"`
	// VsBusiness is this variant's tx/s over the business-only tx/s.
	VsBusiness float64 `json:"vs_business"`
	// VsOutbox is, for outbox+seal and outbox+claim, this variant's tx/s
	// over the plain outbox variant's, when both ran.
	VsOutbox float64     `json:"vs_outbox,omitempty"`
	Machine  *machineCPU `json:"machine,omitempty"`
}

// chosenVariants are the variants --variants names, in its order, or
// every variant but those run only when named when it names none.
// Without business, no ratio is given.
func (b *bench) chosenVariants() (vs []variant, skipped []string, err error) {
	vs, skipped = b.variants()
	if b.o.variants == "" {
		return slices.DeleteFunc(vs, func(v variant) bool { return v.named }), skipped, nil
	}
	var chosen []variant
	for _, name := range strings.Split(b.o.variants, ",") {
		i := slices.IndexFunc(vs, func(v variant) bool { return v.name == strings.TrimSpace(name) })
		if i < 0 {
			return nil, nil, usagef("produce: --variants: no variant %q here (%s)", name, strings.Join(variantNames(vs), ", "))
		}
		chosen = append(chosen, vs[i])
	}
	return chosen, skipped, nil
}

func variantNames(vs []variant) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.name
	}
	return out
}

func (b *bench) variants() (vs []variant, skipped []string) {
	vs = []variant{
		{name: vBusiness},
		{name: vOutbox, enqueue: true},
	}
	if b.d == store.Postgres {
		vs = append(vs,
			variant{name: vNotify, enqueue: true, notify: true},
			variant{name: vRowNotify, enqueue: true, rowNotify: true},
			variant{name: vBatch, enqueue: true, batch: true},
		)
	} else {
		skipped = []string{vNotify, vRowNotify, vBatch}
	}
	vs = append(vs,
		variant{name: vSeal, enqueue: true, seal: true, named: true},
		variant{name: vClaim, enqueue: true, claim: true, named: true},
	)
	return vs, skipped
}

// claimThreshold is the claim-check threshold of outbox+claim:
// --claim-threshold, or one byte below the payload so that every payload
// goes to the store.
func (o *options) claimThreshold() int {
	if o.claimThresh > 0 {
		return o.claimThresh
	}
	return o.payloadBytes - 1
}

// prepareEnqueuers makes the producers of the variants in vs that have
// their own configuration: outbox+seal seals under a key generated for
// the run, outbox+claim writes to a blob directory made for the run
// (b.claimDir, removed by close). Like outbox, they do not signal other
// processes.
func (b *bench) prepareEnqueuers(vs []variant) error {
	for _, v := range vs {
		cfg := &outbox.Config{DisableNotify: true}
		switch {
		case v.seal:
			key, err := seal.NewKey("bench-" + b.runID)
			if err != nil {
				return err
			}
			keys, err := seal.NewStaticKeys(key)
			if err != nil {
				return err
			}
			cfg.Seal = &outbox.SealConfig{Keys: keys, Algorithm: seal.AES256GCM}
		case v.claim:
			dir, err := os.MkdirTemp("", "outbox-bench-blobs-")
			if err != nil {
				return fmt.Errorf("claim-check directory: %w", err)
			}
			b.claimDir = dir
			store, err := claimcheck.OpenDir(dir)
			if err != nil {
				return err
			}
			cfg.ClaimCheck = &outbox.ClaimCheckConfig{Store: store, Threshold: b.o.claimThreshold()}
		default:
			continue
		}
		e, err := b.conn.newEnqueuer(cfg)
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		if b.enqueuers == nil {
			b.enqueuers = map[string]enqueuer{}
		}
		b.enqueuers[v.name] = e
	}
	return nil
}

// emptyClaimDir removes the blobs outbox+claim wrote, so that every run
// of it starts from an empty directory.
func (b *bench) emptyClaimDir() error {
	if b.claimDir == "" {
		return nil
	}
	entries, err := os.ReadDir(b.claimDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(b.claimDir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// produce measures producer transactions per second for every client
// count and variant.
func (b *bench) produce(ctx context.Context) (*produceResult, error) {
	vs, skipped, err := b.chosenVariants()
	if err != nil {
		return nil, err
	}
	if err := b.checkAlone(ctx, false); err != nil {
		return nil, err
	}
	if err := b.createTable(ctx); err != nil {
		return nil, err
	}
	if err := b.prepareEnqueuers(vs); err != nil {
		return nil, err
	}
	res := &produceResult{Skipped: skipped}
	topic := b.topic("produce")
	for _, clients := range b.o.clientList {
		run := produceRun{Clients: clients}
		for _, v := range vs {
			vr, err := b.produceVariant(ctx, topic, clients, v)
			if err != nil {
				return nil, err
			}
			run.Variants = append(run.Variants, vr)
			// Start every variant from the same table sizes.
			if err := b.emptyTable(ctx); err != nil {
				return nil, fmt.Errorf("empty %s: %w", b.table, err)
			}
			if _, err := b.write(ctx, "DELETE FROM outbox_messages WHERE topic = "+b.ph(1), topic); err != nil {
				return nil, fmt.Errorf("delete the variant's messages: %w", err)
			}
			if v.claim {
				if err := b.emptyClaimDir(); err != nil {
					return nil, fmt.Errorf("empty the claim-check directory: %w", err)
				}
			}
		}
		base := 0.0
		if run.Variants[0].Variant == vBusiness {
			base = run.Variants[0].TxPerSecond
		}
		for i := range run.Variants {
			if base > 0 {
				run.Variants[i].VsBusiness = run.Variants[i].TxPerSecond / base
			}
		}
		if i := slices.IndexFunc(run.Variants, func(v variantResult) bool { return v.Variant == vOutbox }); i >= 0 {
			if i > 0 {
				run.OutboxVsBusiness = run.Variants[i].VsBusiness
			}
			for j := range run.Variants {
				if w := &run.Variants[j]; (w.Variant == vSeal || w.Variant == vClaim) && run.Variants[i].TxPerSecond > 0 {
					w.VsOutbox = w.TxPerSecond / run.Variants[i].TxPerSecond
				}
			}
		}
		res.Runs = append(res.Runs, run)
	}
	return res, nil
}

// produceVariant runs clients loops of v's transaction for the duration.
func (b *bench) produceVariant(ctx context.Context, topic string, clients int, v variant) (variantResult, error) {
	insert := b.insertSQL()
	payload := string(b.payload)
	enqueue := b.enqueuers[v.name]
	if enqueue == nil {
		enqueue = func(ctx context.Context, tx txn, msgs []outbox.Message) ([]string, error) {
			return tx.enqueue(ctx, v.notify, msgs)
		}
	}
	if b.d == store.Postgres {
		// Each variant starts right after a checkpoint, so none of them
		// alone pays the full-page writes that follow one. Best effort:
		// CHECKPOINT needs a superuser or the pg_checkpoint role.
		_, _ = b.write(ctx, "CHECKPOINT")
	}
	var count, seq atomic.Int64
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var firstErr error
	var errOnce sync.Once
	m0 := sampleMachine()
	start := time.Now()
	deadline := start.Add(b.o.duration)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := []outbox.Message{{}}
			for ctx.Err() == nil && time.Now().Before(deadline) {
				err := b.conn.inTx(ctx, func(ctx context.Context, tx txn) error {
					if bt, ok := tx.(batchTx); ok && v.batch {
						msg[0] = b.message(topic, seq.Add(1))
						return bt.execEnqueue(ctx, msg, insert, payload)
					}
					if err := tx.exec(ctx, insert, payload); err != nil {
						return err
					}
					if v.enqueue {
						msg[0] = b.message(topic, seq.Add(1))
						if _, err := enqueue(ctx, tx, msg); err != nil {
							return err
						}
					}
					if v.rowNotify {
						return tx.exec(ctx, "SELECT pg_notify('"+store.NotifyChannel+"', '')")
					}
					return nil
				})
				if err != nil {
					if ctx.Err() == nil {
						errOnce.Do(func() { firstErr = fmt.Errorf("produce %s, %d clients: %w", v.name, clients, err) })
					}
					cancel()
					return
				}
				count.Add(1)
			}
		}()
	}
	var last int64
	stop := b.every(func(el time.Duration) string {
		n := count.Load()
		s := fmt.Sprintf("produce: %d clients, %s: %s tx, %s tx/s", clients, v.name, commas(n), commas(n-last))
		last = n
		return s
	})
	wg.Wait()
	stop()
	elapsed := time.Since(start)
	machine := cpuSince(m0)
	if firstErr != nil {
		return variantResult{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return variantResult{}, err
	}
	n := count.Load()
	return variantResult{Variant: v.name, Transactions: n, Seconds: elapsed.Seconds(), TxPerSecond: float64(n) / elapsed.Seconds(), Machine: machine}, nil
}
