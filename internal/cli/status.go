package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/txoutbox/outbox/internal/store"
)

// statusJSON is the document 'outbox status --json' prints.
type statusJSON struct {
	Pending                 int64            `json:"pending"`
	Sent                    int64            `json:"sent"`
	Consumed                int64            `json:"consumed"`
	Dead                    int64            `json:"dead"`
	OldestPendingAgeSeconds float64          `json:"oldest_pending_age_seconds"`
	Topics                  []topicCountJSON `json:"topics"`
}

type topicCountJSON struct {
	Topic  string `json:"topic"`
	Status string `json:"status"`
	Count  int64  `json:"count"`
}

func statusCommand() *command {
	return &command{
		name:     "status",
		synopsis: "[--json] [--db URL] [--config FILE]",
		summary:  "counts by status and topic, oldest pending age",
		about: `Counts messages by status and by topic and reports how long the oldest
pending message has waited. --json prints one object with "pending",
"sent", "consumed", "dead", "oldest_pending_age_seconds" and "topics"
([{"topic", "status", "count"}]).`,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			var df dbFlags
			df.register(fs)
			asJSON := fs.Bool("json", false, "print JSON")
			return func(e *env, pos []string) error {
				if err := noArgs("status", pos); err != nil {
					return err
				}
				db, _, err := e.openDB(df)
				if err != nil {
					return err
				}
				defer db.Close()
				st, err := db.Backend().Store.Stats(e.ctx)
				if err != nil {
					return e.schemaHint(db, "status", err)
				}
				if *asJSON {
					return e.printStatusJSON(st)
				}
				e.printStatus(st)
				return nil
			}
		},
	}
}

func (e *env) printStatusJSON(st store.Stats) error {
	out := statusJSON{
		Pending:                 st.Pending,
		Sent:                    st.Sent,
		Consumed:                st.Consumed,
		Dead:                    st.Dead,
		OldestPendingAgeSeconds: st.OldestPendingAge.Seconds(),
		Topics:                  []topicCountJSON{},
	}
	for _, tc := range st.ByTopic {
		out.Topics = append(out.Topics, topicCountJSON(tc))
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func (e *env) printStatus(st store.Stats) {
	rows := []struct {
		name string
		n    int64
	}{{"pending", st.Pending}, {"sent", st.Sent}, {"consumed", st.Consumed}, {"dead", st.Dead}}
	width := len("MESSAGES")
	for _, r := range rows {
		width = max(width, len(fmt.Sprint(r.n)))
	}
	fmt.Fprintf(e.stdout, "%-8s  %*s\n", "STATUS", width, "MESSAGES")
	for _, r := range rows {
		fmt.Fprintf(e.stdout, "%-8s  %*d\n", r.name, width, r.n)
	}
	if st.Pending > 0 {
		fmt.Fprintf(e.stdout, "\noldest pending message: %s old\n", roundAge(st.OldestPendingAge))
	}
	if len(st.ByTopic) == 0 {
		return
	}
	fmt.Fprintln(e.stdout)
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "TOPIC\tSTATUS\tMESSAGES\n")
	for _, tc := range st.ByTopic {
		fmt.Fprintf(tw, "%s\t%s\t%d\n", tc.Topic, tc.Status, tc.Count)
	}
	_ = tw.Flush()
}

// roundAge keeps an age readable: milliseconds under a minute, seconds
// above.
func roundAge(d time.Duration) time.Duration {
	if d < time.Minute {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}
