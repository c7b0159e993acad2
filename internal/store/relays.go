package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Relay is a relay registered on the database, as its heartbeat left it.
type Relay struct {
	ID string
	// Routes are the patterns of the relay's route table, in order.
	// RoutesKnown is false for a relay that recorded none (a version from
	// before schema version 16): what it routes is unknown.
	Routes      []string
	RoutesKnown bool
	// Fingerprint names the route table in a few characters: relays with
	// the same patterns in the same order have the same one ("" when the
	// routes are unknown).
	Fingerprint string
	// SeenAgo is how long ago the relay last renewed its registration, by
	// database time (only in the listing of Relays).
	SeenAgo time.Duration
	// Wake is how the relay learns of new messages between its polls, as
	// it recorded it ("notify + probe 10ms", "probe 10ms", "poll"); "" for
	// a relay of a version that records none (only in the listing of
	// Relays).
	Wake string
	// Source is the adopted table the relay serves (outbox relay
	// --adopt), "" for outbox_messages.
	Source string
}

// LiveWithin is how recent a relay's heartbeat must be for the status and
// the admin stats to count it as live: a running relay renews its
// registration every few seconds.
const LiveWithin = time.Minute

// LiveRelays returns the relays of relays seen within LiveWithin, and
// whether they all route alike: every one recorded its routes, and the
// same ones. A relay with no route for a topic another one routes leaves
// its messages waiting (docs/configuration.md).
func LiveRelays(relays []Relay) (live []Relay, agree bool) {
	agree = true
	for _, r := range relays {
		if r.SeenAgo > LiveWithin {
			continue
		}
		if !r.RoutesKnown || (len(live) > 0 && r.Fingerprint != live[0].Fingerprint) {
			agree = false
		}
		live = append(live, r)
	}
	return live, agree
}

// RelayJSON is a live relay in the status document ('outbox status
// --json') and the admin stats (GET /api/v1/stats).
type RelayJSON struct {
	ID string `json:"id"`
	// SeenSecondsAgo is the time since its last heartbeat.
	SeenSecondsAgo float64 `json:"seen_seconds_ago"`
	// Routes are its route patterns in order, and RoutesFingerprint names
	// them; both absent for a relay of a version that records none.
	Routes            []string `json:"routes,omitempty"`
	RoutesFingerprint string   `json:"routes_fingerprint,omitempty"`
	// Wake is how the relay learns of new messages between its polls:
	// "notify" (PostgreSQL LISTEN, for Go producers), "probe 10ms" (the
	// change probe and its interval), both joined by " + ", or "poll";
	// absent for a relay of a version that records none.
	Wake string `json:"wake,omitempty"`
	// Table is the adopted table the relay serves; absent for
	// outbox_messages.
	Table string `json:"table,omitempty"`
}

// RelaysJSON is relays as RelayJSON, an empty list for none.
func RelaysJSON(relays []Relay) []RelayJSON {
	out := make([]RelayJSON, 0, len(relays))
	for _, r := range relays {
		out = append(out, RelayJSON{ID: r.ID, SeenSecondsAgo: r.SeenAgo.Seconds(), Routes: r.Routes, RoutesFingerprint: r.Fingerprint, Wake: r.Wake, Table: r.Source})
	}
	return out
}

// EncodeRoutes is the form in which a relay records its route patterns
// (a JSON array of strings, in order) for Heartbeat.
func EncodeRoutes(patterns []string) string {
	if patterns == nil {
		patterns = []string{}
	}
	b, _ := json.Marshal(patterns)
	return string(b)
}

// setRoutes decodes a relays row's routes column into r.
func (r *Relay) setRoutes(col *string) {
	r.Routes, r.RoutesKnown, r.Fingerprint = nil, false, ""
	if col == nil || json.Unmarshal([]byte(*col), &r.Routes) != nil {
		r.Routes = nil
		return
	}
	r.RoutesKnown = true
	sum := sha256.Sum256([]byte(EncodeRoutes(r.Routes)))
	r.Fingerprint = hex.EncodeToString(sum[:4])
}

// relaySourceVersion is the migration that adds outbox_relays.source
// (routes and wake came in 16 and 18).
const relaySourceVersion = 20

// Relays lists every relay of outbox_messages registered on the database,
// live or not (a relay that stopped cleanly removes itself; one that died
// stays until pruned), sorted by id.
func (st *Store) Relays(ctx context.Context) ([]Relay, error) {
	return st.RelaysOf(ctx, "")
}

// RelaysOf lists the registered relays that serve source (an adopted
// table's name; "" for outbox_messages), live or not, sorted by id.
func (st *Store) RelaysOf(ctx context.Context, source string) ([]Relay, error) {
	all, err := AppendRows(ctx, st.db, nil, func(scan func(...any) error) (Relay, error) {
		var r Relay
		var routes, src *string
		var age float64
		err := scan(&r.ID, &routes, &age, &src)
		r.setRoutes(routes)
		r.SeenAgo = time.Duration(age * float64(time.Second))
		if src != nil {
			r.Source = *src
		}
		return r, err
	}, st.s.relays)
	if err != nil {
		if v, verr := SchemaVersion(ctx, st.db); verr == nil && v < relaySourceVersion {
			return nil, nil // a schema from before the relays were listed this way
		}
		return nil, err
	}
	wakes, err := st.relayWakes(ctx)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, r := range all {
		if r.Source == source {
			r.Wake = wakes[r.ID]
			out = append(out, r)
		}
	}
	return out, nil
}

// RegisterRelay records that relay id is alive and serves routes (as
// EncodeRoutes makes them) from source, a table other than
// outbox_messages (an adopted table's name): RelaysOf(source) lists it,
// and the relays of outbox_messages do not count it (Heartbeat).
func (st *Store) RegisterRelay(ctx context.Context, id, routes, source string) error {
	_, err := st.ExecRetry(ctx, st.s.registerRelay, id, routes, source)
	return err
}

// Heartbeat records that relay id is alive and serves routes (as
// EncodeRoutes makes them), and returns all live relays (seen within ttl),
// sorted by id.
func (st *Store) Heartbeat(ctx context.Context, id, routes string, ttl time.Duration) ([]Relay, error) {
	if _, err := st.ExecRetry(ctx, st.s.registerRelay, id, routes, nil); err != nil {
		return nil, err
	}
	return AppendRows(ctx, st.db, nil, func(scan func(...any) error) (Relay, error) {
		var r Relay
		var routes *string
		err := scan(&r.ID, &routes)
		r.setRoutes(routes)
		return r, err
	}, st.s.liveRelays, ttl.Microseconds())
}

// PruneRelays forgets relays not seen for longer than age.
func (st *Store) PruneRelays(ctx context.Context, age time.Duration) error {
	_, err := st.ExecRetry(ctx, st.s.pruneRelays, age.Microseconds())
	return err
}

// DropRelay forgets relay id and its view of the routes, and releases its
// leases.
func (st *Store) DropRelay(ctx context.Context, id string) error {
	if _, err := st.ExecRetry(ctx, st.s.releaseAll, id); err != nil {
		return err
	}
	if _, err := st.ExecRetry(ctx, st.s.dropRouteHealth, id); err != nil {
		return err
	}
	_, err := st.ExecRetry(ctx, st.s.dropRelay, id)
	return err
}

// RecordRoute records that relay sees route down (with reason) or up, from
// now (database time).
func (st *Store) RecordRoute(ctx context.Context, relay, route string, down bool, reason string) error {
	state := RouteUp
	if down {
		state = RouteDown
	}
	_, err := st.ExecRetry(ctx, st.s.recordRoute, relay, route, state, reason)
	return err
}

// routeHealthVersion is the migration that adds outbox_route_health.
const routeHealthVersion = 6

// RouteHealth lists what the live relays last recorded about their
// routes, by route then relay. Routes no relay ever saw down are not in
// it: they have been up since their relays started.
func (st *Store) RouteHealth(ctx context.Context) ([]RouteHealth, error) {
	rows, err := st.db.Query(ctx, st.s.routeHealth)
	if err != nil {
		if v, verr := SchemaVersion(ctx, st.db); verr == nil && v < routeHealthVersion {
			return nil, nil // a schema from before route health: nothing recorded
		}
		return nil, err
	}
	defer rows.Close()
	var out []RouteHealth
	for rows.Next() {
		var h RouteHealth
		var age float64
		if err := rows.Scan(&h.Route, &h.Relay, &h.State, &age, &h.Reason); err != nil {
			return nil, err
		}
		h.For = time.Duration(age * float64(time.Second)).Round(time.Millisecond)
		out = append(out, h)
	}
	return out, rows.Err()
}
