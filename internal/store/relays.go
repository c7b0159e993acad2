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
}

// RelaysJSON is relays as RelayJSON, an empty list for none.
func RelaysJSON(relays []Relay) []RelayJSON {
	out := make([]RelayJSON, 0, len(relays))
	for _, r := range relays {
		out = append(out, RelayJSON{ID: r.ID, SeenSecondsAgo: r.SeenAgo.Seconds(), Routes: r.Routes, RoutesFingerprint: r.Fingerprint, Wake: r.Wake})
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

// relayRoutesVersion is the migration that adds outbox_relays.routes.
const relayRoutesVersion = 16

// Relays lists every relay registered on the database, live or not (a
// relay that stopped cleanly removes itself; one that died stays until
// pruned), sorted by id.
func (st *Store) Relays(ctx context.Context) ([]Relay, error) {
	out, err := appendRows(ctx, st.db, nil, func(scan func(...any) error) (Relay, error) {
		var r Relay
		var routes *string
		var age float64
		err := scan(&r.ID, &routes, &age)
		r.setRoutes(routes)
		r.SeenAgo = time.Duration(age * float64(time.Second))
		return r, err
	}, st.s.relays)
	if err != nil {
		if v, verr := SchemaVersion(ctx, st.db); verr == nil && v < relayRoutesVersion {
			return nil, nil // a schema from before the routes were recorded
		}
		return nil, err
	}
	wakes, err := st.relayWakes(ctx)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Wake = wakes[out[i].ID]
	}
	return out, nil
}
