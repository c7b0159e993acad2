package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/fleet"
	"github.com/txoutbox/outbox/internal/store"
)

// fleetStatusTimeout bounds the reading of one database of a list, so
// that one down database shows as an error instead of holding up the rest.
const fleetStatusTimeout = 5 * time.Second

// fleetStatusJSON is the document 'outbox status --db-file FILE --json'
// prints.
type fleetStatusJSON struct {
	Databases []databaseStatusJSON `json:"databases"`
	// Total adds up the databases that could be read.
	Total struct {
		Pending  int64 `json:"pending"`
		Sent     int64 `json:"sent"`
		Consumed int64 `json:"consumed"`
		Dead     int64 `json:"dead"`
		Expired  int64 `json:"expired"`
	} `json:"total"`
}

// databaseStatusJSON is one database of the list: its name, the relays
// holding its partitions, and its status document, or the error that kept
// it from being read.
type databaseStatusJSON struct {
	Database string   `json:"database"`
	Relays   []string `json:"relays"`
	Error    string   `json:"error,omitempty"`
	*store.StatsJSON
}

// databaseStatus is what was read of one database.
type databaseStatus struct {
	db     fleet.Database
	view   statusView
	relays []string
	err    error
}

// fleetStatus prints the status of every database listed in file: one
// table, or one JSON document. It fails (after printing) when a database
// could not be read.
func (e *env) fleetStatus(file string, asJSON bool) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return usagef("status: --db-file: %v", err)
	}
	list, err := fleet.ParseList(bytes.NewReader(b))
	if err != nil {
		return usagef("status: %s: %v", file, err)
	}
	for _, db := range list {
		e.addSecret(passwordOf(db.URL))
	}
	out := make([]databaseStatus, len(list))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, db := range list {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i] = e.readDatabaseStatus(db)
		})
	}
	wg.Wait()
	failed := 0
	for _, s := range out {
		if s.err != nil {
			failed++
		}
	}
	if asJSON {
		err = e.printFleetStatusJSON(e.stdout, out)
	} else {
		e.printFleetStatus(e.stdout, out)
	}
	if err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("status: %d of %d databases could not be read", failed, len(out))
	}
	return nil
}

// readDatabaseStatus reads one database's status within fleetStatusTimeout.
func (e *env) readDatabaseStatus(db fleet.Database) databaseStatus {
	ctx, cancel := context.WithTimeout(e.ctx, fleetStatusTimeout)
	defer cancel()
	s := databaseStatus{db: db}
	conn, err := dburl.OpenLimited(ctx, db.URL, dburl.Limits{MaxConns: 1})
	if err != nil {
		s.err = err
		return s
	}
	defer conn.Close()
	st, err := asRelaysSee(ctx, conn.Backend().Store)
	if err != nil {
		s.err = e.schemaHint(conn, "status", err)
		return s
	}
	if s.view, s.err = readStatus(ctx, st); s.err != nil {
		s.err = e.schemaHint(conn, "status", s.err)
		return s
	}
	s.relays, s.err = fleet.Holders(ctx, st.DB(), st.Dialect())
	return s
}

func (e *env) printFleetStatusJSON(w io.Writer, list []databaseStatus) error {
	var doc fleetStatusJSON
	doc.Databases = []databaseStatusJSON{}
	for _, s := range list {
		d := databaseStatusJSON{Database: s.db.Name, Relays: s.relays}
		if d.Relays == nil {
			d.Relays = []string{}
		}
		if s.err != nil {
			d.Error = e.redact(errorLine(s.err))
		} else {
			d.StatsJSON = newStatusJSON(s.view)
			doc.Total.Pending += s.view.Pending
			doc.Total.Sent += s.view.Sent
			doc.Total.Consumed += s.view.Consumed
			doc.Total.Dead += s.view.Dead
			doc.Total.Expired += s.view.Expired
		}
		doc.Databases = append(doc.Databases, d)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

// printFleetStatus writes one row per database: counts, the oldest due
// message's wait, the routes down, the relays serving it, or its error.
func (e *env) printFleetStatus(w io.Writer, list []databaseStatus) {
	t := newTable(w, "DATABASE", "PENDING", "SENT", "CONSUMED", "DEAD", "EXPIRED", "OLDEST DUE", "ROUTES DOWN", "RELAYS", "ERROR")
	var total [5]int64
	for _, s := range list {
		if s.err != nil {
			t.row(s.db.Name, "-", "-", "-", "-", "-", "-", "-", "-", truncate(e.redact(errorLine(s.err)), 120))
			continue
		}
		v := s.view
		var down []string
		for _, rh := range v.Routes {
			if rh.State == store.RouteDown {
				down = append(down, rh.Route)
			}
		}
		due := "-"
		if v.Pending > 0 {
			due = roundAge(v.OldestDueAge).String()
		}
		for i, n := range []int64{v.Pending, v.Sent, v.Consumed, v.Dead, v.Expired} {
			total[i] += n
		}
		t.row(s.db.Name, itoa(v.Pending), itoa(v.Sent), itoa(v.Consumed), itoa(v.Dead), itoa(v.Expired), due,
			strings.Join(down, ","), strings.Join(s.relays, ","), "")
	}
	t.row("total", itoa(total[0]), itoa(total[1]), itoa(total[2]), itoa(total[3]), itoa(total[4]), "", "", "", "")
	t.flush()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
