package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// result is the whole report; its JSON form is the --json output, with
// one sub-object for the workload that ran.
type result struct {
	Workload    string         `json:"workload"`
	Database    string         `json:"database,omitempty"`
	Dialect     string         `json:"dialect,omitempty"`
	Destination string         `json:"destination,omitempty"`
	Settings    settings       `json:"settings"`
	StartedAt   time.Time      `json:"started_at"`
	GoMaxProcs  int            `json:"gomaxprocs"`
	NumCPU      int            `json:"num_cpu"`
	Produce     *produceResult `json:"produce,omitempty"`
	Drain       *drainResult   `json:"drain,omitempty"`
	Steady      *steadyResult  `json:"steady,omitempty"`
	Sustain     *sustainResult `json:"sustain,omitempty"`
	Ceiling     *drainResult   `json:"ceiling,omitempty"`
	Publish     *publishResult `json:"publish,omitempty"`
}

type settings struct {
	PayloadBytes    int     `json:"payload_bytes"`
	Keys            int     `json:"keys"`
	Relays          int     `json:"relays,omitempty"`
	Workers         int     `json:"workers,omitempty"`
	BatchSize       int     `json:"batch_size,omitempty"`
	Clients         []int   `json:"clients,omitempty"`
	DurationSeconds float64 `json:"duration_seconds,omitempty"`
	WarmupSeconds   float64 `json:"warmup_seconds,omitempty"`
	Rate            float64 `json:"rate,omitempty"`
	StartRate       float64 `json:"start_rate,omitempty"`
	MaxRate         float64 `json:"max_rate,omitempty"`
	Precision       float64 `json:"precision,omitempty"`
	WindowSeconds   float64 `json:"window_seconds,omitempty"`
	Messages        int     `json:"messages,omitempty"`
	SentRows        int     `json:"sent_rows,omitempty"`
}

// writeJSON writes a report as indented JSON.
func writeJSON(w io.Writer, report any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(report)
}

func writeTable(w io.Writer, r *result) {
	fmt.Fprintf(w, "outbox bench %s\n", r.Workload)
	head := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if r.Database != "" {
		fmt.Fprintf(head, "  database\t%s (%s)\n", r.Database, r.Dialect)
	}
	if r.Destination != "" {
		fmt.Fprintf(head, "  destination\t%s\n", r.Destination)
	}
	fmt.Fprintf(head, "  settings\t%s\n", settingsLine(r))
	fmt.Fprintf(head, "  machine\t%d CPUs, GOMAXPROCS %d; started %s\n", r.NumCPU, r.GoMaxProcs, r.StartedAt.Format(time.RFC3339))
	head.Flush()
	fmt.Fprintln(w)
	switch {
	case r.Produce != nil:
		writeProduce(w, r.Produce)
	case r.Drain != nil:
		writeDrain(w, r.Drain, "delivered")
	case r.Ceiling != nil:
		writeDrain(w, r.Ceiling, "settled (no publishing)")
	case r.Steady != nil:
		writeSteady(w, r.Steady)
	case r.Sustain != nil:
		writeSustain(w, r.Sustain)
	case r.Publish != nil:
		writePublish(w, r.Publish)
	}
}

func settingsLine(r *result) string {
	s := r.Settings
	var parts []string
	switch r.Workload {
	case wProduce:
		parts = append(parts, "clients "+joinInts(s.Clients), fmt.Sprintf("%gs per variant", s.DurationSeconds))
	case wPublish:
		parts = append(parts, commas(int64(s.Messages))+" messages", plural(s.Workers, "worker"), fmt.Sprintf("rounds of %d", s.BatchSize))
	case wDrain, wCeiling:
		parts = append(parts, commas(int64(s.Messages))+" messages")
		if s.SentRows > 0 {
			parts = append(parts, commas(int64(s.SentRows))+" sent rows preloaded")
		}
	case wSteady:
		parts = append(parts, fmt.Sprintf("rate %s msg/s", fmtFloat(s.Rate)), fmt.Sprintf("%gs (+%gs warm-up)", s.DurationSeconds, s.WarmupSeconds),
			fmt.Sprintf("%d producer clients", s.Clients[0]))
	case wSustain:
		parts = append(parts, fmt.Sprintf("rates %s to %s msg/s, to within %g%%", fmtFloat(s.StartRate), fmtFloat(s.MaxRate), s.Precision*100),
			fmt.Sprintf("%gs (+%gs warm-up) per trial, each in a fresh database", s.WindowSeconds, s.WarmupSeconds),
			fmt.Sprintf("%d producer clients", s.Clients[0]))
	}
	if s.Relays > 0 {
		parts = append(parts, plural(s.Relays, "relay"), fmt.Sprintf("batch ≤ %d", s.BatchSize))
	}
	parts = append(parts, fmt.Sprintf("payload %d B", s.PayloadBytes))
	if s.Keys > 0 {
		parts = append(parts, commas(int64(s.Keys))+" keys")
	} else {
		parts = append(parts, "no keys")
	}
	return strings.Join(parts, " · ")
}

func writeProduce(w io.Writer, p *produceResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "clients\tvariant\ttx/s\tvs business\ttransactions\t  machine cpu")
	for _, run := range p.Runs {
		for _, v := range run.Variants {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%.2f\t%s\t  %s\n", run.Clients, v.Variant, commas(int64(math.Round(v.TxPerSecond))), v.VsBusiness, commas(v.Transactions), v.Machine)
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
	ran := map[string]bool{}
	for _, run := range p.Runs {
		fmt.Fprintf(w, "outbox/business at %d clients: %.2f\n", run.Clients, run.OutboxVsBusiness)
		for _, v := range run.Variants {
			ran[v.Variant] = true
			if (v.Variant == vSeal || v.Variant == vClaim) && v.VsBusiness > 0 {
				fmt.Fprintf(w, "%s/business at %d clients: %.2f", v.Variant, run.Clients, v.VsBusiness)
				if v.VsOutbox > 0 {
					fmt.Fprintf(w, " (%s/outbox: %.2f)", v.Variant, v.VsOutbox)
				}
				fmt.Fprintln(w)
			}
		}
	}
	fmt.Fprintln(w, "outbox: the producer's wake-up is off; outbox+notify: coalesced pg_notify after commit (the default);")
	fmt.Fprintln(w, "outbox+row-notify: pg_notify inside every transaction (the anti-pattern, for comparison);")
	fmt.Fprintln(w, "outbox-batch: the business row and the enqueue sent as one pgx batch (outboxpgx Batched), wake-up off.")
	if ran[vSeal] {
		fmt.Fprintln(w, "outbox+seal: the payload sealed at enqueue (Config.Seal, AES-256-GCM, a key made for the run), wake-up off.")
	}
	if ran[vClaim] {
		fmt.Fprintln(w, "outbox+claim: payloads over the threshold written to a claim-check directory (Config.ClaimCheck, claimcheck.Dir in a temporary directory), the reference in the row, wake-up off.")
	}
	if len(p.Skipped) > 0 {
		fmt.Fprintf(w, "not run (PostgreSQL only): %s\n", strings.Join(p.Skipped, ", "))
	}
}

// runCost is what a timed run of messages cost this process; drain,
// ceiling and publish report it alike.
type runCost struct {
	WallSeconds       float64 `json:"wall_seconds"`
	MessagesPerSecond float64 `json:"messages_per_second"`
	CPUSeconds        float64 `json:"cpu_seconds"`
	CPUSecondsPer10k  float64 `json:"cpu_seconds_per_10k"`
	PeakRSSBytes      int64   `json:"peak_rss_bytes"`
	// Machine is where the machine's CPU went during the timed part.
	Machine *machineCPU `json:"machine,omitempty"`
}

// measure records n messages done in wall using cpu of this process's
// time, and the process's peak RSS; Machine is the caller's to set.
func (c *runCost) measure(n int64, wall, cpu time.Duration) {
	c.WallSeconds = wall.Seconds()
	c.MessagesPerSecond = float64(n) / c.WallSeconds
	c.CPUSeconds = cpu.Seconds()
	c.CPUSecondsPer10k = c.CPUSeconds / float64(max(n, 1)) * 10000
	c.PeakRSSBytes = peakRSS()
}

// write prints the cost's lines to tw; other names whose CPU the process
// figure leaves out.
func (c *runCost) write(tw io.Writer, other string) {
	fmt.Fprintf(tw, "wall time\t%.2f s\n", c.WallSeconds)
	fmt.Fprintf(tw, "throughput\t%s msg/s\n", commas(int64(math.Round(c.MessagesPerSecond))))
	fmt.Fprintf(tw, "process cpu\t%.2f s, %.3f s per 10k messages (this process; not %s)\n", c.CPUSeconds, c.CPUSecondsPer10k, other)
	fmt.Fprintf(tw, "peak rss\t%s\n", mib(c.PeakRSSBytes))
	fmt.Fprintf(tw, "machine cpu\t%s\n", c.Machine)
}

func writeDrain(w io.Writer, d *drainResult, verb string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	via := ""
	if d.ReadPath == readPathSnapshot {
		via = " by the snapshot read"
	}
	fmt.Fprintf(tw, "%s\t%s%s (%s rows verified sent)\n", verb, commas(d.Delivered), via, commas(d.VerifiedSent))
	d.runCost.write(tw, "the database's")
	bs := d.Batches
	fmt.Fprintf(tw, "batches\t%s rounds, mean %.0f, max %s, limit reached %s; retried %s, dead %s, deferred %s, skipped %s\n",
		commas(bs.Rounds), bs.MeanRead, commas(int64(bs.MaxRead)), commas(int64(bs.MaxBatchSize)), commas(bs.Retried), commas(bs.Dead), commas(bs.Deferred), commas(bs.Skipped))
	if d.SinkRequests > 0 {
		fmt.Fprintf(tw, "sink\t%s requests\n", commas(d.SinkRequests))
	}
	fmt.Fprintf(tw, "prefill\t%s messages in %.2f s (%s msg/s, EnqueueMany × 1000)\n", commas(int64(d.Messages)), d.PrefillSeconds, commas(int64(math.Round(d.PrefillPerSecond))))
	if d.Analyzed {
		fmt.Fprintf(tw, "statistics\tANALYZE outbox_messages after the prefill (%.2f s; --analyze=false to skip)\n", d.AnalyzeSeconds)
	}
	if d.SentRowsSeconds > 0 {
		fmt.Fprintf(tw, "sent rows\tloaded in %.2f s\n", d.SentRowsSeconds)
	}
	tw.Flush()
}

func writeSteady(w io.Writer, s *steadyResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "rate\ttarget %s msg/s, achieved %s msg/s (%s sends started >1 ms late)\n", fmtFloat(s.TargetRate), fmtFloat(math.Round(s.AchievedRate*10)/10), commas(s.LateSends))
	fmt.Fprintf(tw, "messages\t%s committed, %s confirmed, %s unconfirmed; backlog when producers stopped: %s\n",
		commas(s.Committed), commas(s.Count), commas(s.Unconfirmed), commas(s.BacklogAtEnd))
	fmt.Fprintf(tw, "process cpu\t%.2f s; peak rss %s\n", s.CPUSeconds, mib(s.PeakRSSBytes))
	fmt.Fprintf(tw, "machine cpu\t%s\n", s.Machine)
	if s.RelayDBCores != nil && s.ProducerDBCores != nil && s.AchievedRate > 0 {
		fmt.Fprintf(tw, "database cpu\trelay %.0f µs/msg (%.2f cores), producers %.0f µs/msg (%.2f cores), their backends alone\n",
			*s.RelayDBCores*1e6/s.AchievedRate, *s.RelayDBCores, *s.ProducerDBCores*1e6/s.AchievedRate, *s.ProducerDBCores)
	}
	bs := s.Batches
	fmt.Fprintf(tw, "batches\t%s rounds, mean %.1f, max %s; retried %s, dead %s\n", commas(bs.Rounds), bs.MeanRead, commas(int64(bs.MaxRead)), commas(bs.Retried), commas(bs.Dead))
	tw.Flush()
	fmt.Fprintln(w)
	lt := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(lt, "latency, ms\tcount\tp50\tp90\tp99\tp99.9\tmax\tmean\t")
	row := func(name string, l latencySummary) {
		fmt.Fprintf(lt, "%s\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", name, commas(l.Count), l.P50, l.P90, l.P99, l.P999, l.Max, l.Mean)
	}
	row("intended send → confirm", s.Latency)
	row("commit → confirm", s.CommitToConfirm)
	if s.LatencyToReceipt != nil && s.CommitToReceipt != nil {
		row("intended send → receipt", *s.LatencyToReceipt)
		row("commit → receipt", *s.CommitToReceipt)
	}
	lt.Flush()
}

// every prints line() on stderr once a second until the returned
// function is called.
func (b *bench) every(line func(elapsed time.Duration) string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	start := time.Now()
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				fmt.Fprintln(b.stderr, line(now.Sub(start)))
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done); wg.Wait() })
	}
}

// commas renders n with thousands separators.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func fmtFloat(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return commas(int64(f))
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

func mib(b int64) string {
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}
