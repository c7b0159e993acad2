package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/store"
)

// statusView is what 'outbox status' shows.
type statusView struct {
	store.Stats
	Routes []store.RouteHealth // summarized
	Relays []store.Relay       // seen within store.LiveWithin
	at     time.Time
}

// relayLister is a status source that lists the relays registered on the
// database (outbox_messages' store; an adopted table's keeps no registry).
type relayLister interface {
	Relays(ctx context.Context) ([]store.Relay, error)
}

// readStatus reads the counts and the routes' health.
func readStatus(ctx context.Context, st statusSource) (statusView, error) {
	stats, err := st.Stats(ctx)
	if err != nil {
		return statusView{}, err
	}
	views, err := st.RouteHealth(ctx)
	if err != nil {
		return statusView{}, err
	}
	view := statusView{Stats: stats, Routes: store.SummarizeRoutes(views), at: time.Now()}
	if rl, ok := st.(relayLister); ok {
		relays, err := rl.Relays(ctx)
		if err != nil {
			return statusView{}, err
		}
		view.Relays, _ = store.LiveRelays(relays)
	}
	return view, nil
}

func statusCommand() *command {
	return &command{
		name:     "status",
		synopsis: "[--json] [--watch [--interval 2s]] [--db URL | --db-file FILE] [--config FILE]",
		summary:  "counts by status and topic, oldest pending age",
		about: `Counts messages by status and by topic and reports how long the oldest
due message has waited for delivery (since its available_at: a delayed
message counts from its delivery time, a requeued one from its requeue)
and how old the oldest pending message is (since created_at). --json
prints one object with "pending", "sent", "consumed", "dead", "expired"
(messages whose expires_at came before they were delivered; the table
shows that row only when there are some), "oldest_pending_age_seconds",
"oldest_due_age_seconds" and "topics" ([{"topic", "status", "count"}]).

--db-file FILE reads every database of a list (as 'outbox relay
--db-file' takes it) and prints one row per database: counts, the oldest
due message's wait, routes down, the relays holding its partitions, or
why it could not be read (it then exits 1 after printing). With --json:
{"databases": [{"database", "relays", "error", and the fields above}],
"total": {"pending", "sent", "consumed", "dead", "expired"}}.

--watch redraws the counts every --interval until Ctrl-C (on a terminal
in place; otherwise one frame after another); with --json it prints one
JSON object per line.

` + adoptAbout + ` Its rows count by the
table's own states: pending (still to deliver), sent, consumed, dead.`,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			var df dbFlags
			df.register(fs)
			asJSON := fs.Bool("json", false, "print JSON")
			watch := fs.Bool("watch", false, "redraw every --interval until Ctrl-C")
			interval := fs.Duration("interval", 2*time.Second, "time between redraws with --watch")
			adoptSpec := fs.String("adopt", "", adoptUsage)
			dbFile := fs.String("db-file", "", "one row per database listed in `FILE` (as for 'outbox relay --db-file')")
			return func(e *env, pos []string) error {
				if err := noArgs("status", pos); err != nil {
					return err
				}
				if *dbFile != "" {
					if *watch || df.db != "" {
						return usagef("status: --db-file goes without --db and --watch")
					}
					return e.fleetStatus(*dbFile, *asJSON)
				}
				if *interval <= 0 {
					return usagef("status: --interval must be positive")
				}
				db, _, err := e.openDB(df)
				if err != nil {
					return err
				}
				defer db.Close()
				src, err := statusSourceOf(e.ctx, db, *adoptSpec)
				if err != nil {
					return err
				}
				if *watch {
					return e.watchStatus(db, src, *interval, *asJSON)
				}
				st, err := readStatus(e.ctx, src)
				if err != nil {
					return e.schemaHint(db, "status", err)
				}
				if *asJSON {
					return printStatusJSON(e.stdout, st, true)
				}
				printStatus(e.stdout, st)
				return nil
			}
		},
	}
}

// watchStatus prints a status frame every interval until the context ends
// or SIGINT/SIGTERM arrives, then returns nil. On a terminal each frame
// replaces the last; elsewhere (a pipe, a file) frames follow each other,
// each under a header line. A failed refresh shows its error in the frame
// and the watch goes on, unless the very first one fails.
func (e *env) watchStatus(db *dburl.DB, src statusSource, interval time.Duration, asJSON bool) error {
	ctx, stop := signal.NotifyContext(e.ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	term := isTerminal(e.stdout)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for frame := 0; ; frame++ {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		st, err := readStatus(ctx, src)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && frame == 0 {
			return e.schemaHint(db, "status", err)
		}
		var b bytes.Buffer
		switch {
		case asJSON && err != nil:
			line, _ := json.Marshal(map[string]string{"error": e.redact(errorLine(err))})
			b.Write(append(line, '\n'))
		case asJSON:
			if err := printStatusJSON(&b, st, false); err != nil {
				return err
			}
		default:
			if term {
				b.WriteString("\x1b[H\x1b[2J")
			} else if frame > 0 {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "outbox status at %s (every %s; Ctrl-C to stop)\n\n", time.Now().Format("15:04:05"), interval)
			if err != nil {
				fmt.Fprintf(&b, "refresh failed: %s\n", e.redact(errorLine(err)))
			} else {
				printStatus(&b, st)
			}
		}
		if _, err := e.stdout.Write(b.Bytes()); err != nil {
			return err
		}
		timer.Reset(interval)
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// printStatusJSON writes st as the status JSON document: indented, or
// on one line.
func printStatusJSON(w io.Writer, st statusView, indent bool) error {
	out := newStatusJSON(st)
	enc := json.NewEncoder(w)
	if indent {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(out)
}

// newStatusJSON is st as the status JSON document.
func newStatusJSON(st statusView) *store.StatsJSON {
	return store.NewStatsJSON(st.Stats, st.Routes, st.Relays, st.at, time.Second)
}

// printStatus writes st as tables.
func printStatus(w io.Writer, st statusView) {
	rows := []struct {
		name string
		n    int64
	}{{"pending", st.Pending}, {"sent", st.Sent}, {"consumed", st.Consumed}, {"dead", st.Dead}}
	if st.Expired > 0 {
		rows = append(rows, struct {
			name string
			n    int64
		}{"expired", st.Expired})
	}
	width := len("MESSAGES")
	for _, r := range rows {
		width = max(width, len(fmt.Sprint(r.n)))
	}
	fmt.Fprintf(w, "%-8s  %*s\n", "STATUS", width, "MESSAGES")
	for _, r := range rows {
		fmt.Fprintf(w, "%-8s  %*d\n", r.name, width, r.n)
	}
	if st.Pending > 0 {
		fmt.Fprintf(w, "\noldest pending message: %s old\n", roundAge(st.OldestPendingAge))
		fmt.Fprintf(w, "oldest due message: waiting %s\n", roundAge(st.OldestDueAge))
	}
	if len(st.ByTopic) > 0 {
		fmt.Fprintln(w)
		t := newTable(w, "TOPIC", "STATUS", "MESSAGES")
		for _, tc := range st.ByTopic {
			t.row(tc.Topic, tc.Status, strconv.FormatInt(tc.Count, 10))
		}
		t.flush()
	}
	printRoutes(w, st)
	printRelays(w, st)
}

// printRelays writes the live relays with their routes' fingerprints, and
// whether their routes agree; nothing when none is live.
func printRelays(w io.Writer, st statusView) {
	if len(st.Relays) == 0 {
		return
	}
	fmt.Fprintln(w)
	t := newTable(w, "RELAY", "SEEN", "WAKE", "ROUTES")
	for _, r := range st.Relays {
		routes := "unknown (a version that does not record them)"
		if r.RoutesKnown {
			routes = r.Fingerprint + "  " + truncate(strings.Join(r.Routes, " "), 100)
		}
		wake := r.Wake
		if wake == "" {
			wake = "-"
		}
		t.row(r.ID, roundAge(r.SeenAgo).String()+" ago", wake, routes)
	}
	t.flush()
	if len(st.Relays) > 1 {
		if _, agree := store.LiveRelays(st.Relays); agree {
			fmt.Fprintln(w, "routes: the relays agree")
		} else {
			fmt.Fprintln(w, "routes: the relays DIFFER; a message whose topic only some of them route waits, uncharged, for at most the no-route grace")
		}
	}
}

// printRoutes writes the routes' health: those a live relay has seen
// down, with since when; nothing when none has.
func printRoutes(w io.Writer, st statusView) {
	if len(st.Routes) == 0 {
		return
	}
	fmt.Fprintln(w)
	t := newTable(w, "ROUTE", "STATE", "SINCE", "FOR", "REASON")
	for _, rh := range st.Routes {
		t.row(rh.Route, rh.State, st.at.Add(-rh.For).UTC().Format(time.RFC3339), roundAge(rh.For).String(), truncate(rh.Reason, 120))
	}
	t.flush()
}

// roundAge keeps an age readable: milliseconds under a minute, seconds
// above.
func roundAge(d time.Duration) time.Duration {
	if d < time.Minute {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}
