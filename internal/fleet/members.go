package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/txoutbox/outbox/internal/store"
)

// Membership is one member's view of its fleet's rows in the coordination
// database's outbox_fleet_members. Times are the database's, so members'
// clocks need not agree.
type Membership struct {
	q       store.Querier
	dialect store.Dialect
	fleet   string
	self    string
	ttl     time.Duration
	pruned  time.Time // when Beat last forgot old members
}

// NewMembership returns member self of fleet, over q in a database of
// dialect d; a member whose row is older than ttl counts as gone.
func NewMembership(q store.Querier, d store.Dialect, fleet, self string, ttl time.Duration) (*Membership, error) {
	switch {
	case fleet == "" || len(fleet) > 255:
		return nil, fmt.Errorf("fleet name must be 1 to 255 characters")
	case self == "" || len(self) > 255:
		return nil, fmt.Errorf("member id must be 1 to 255 characters")
	case ttl < time.Second:
		return nil, fmt.Errorf("member TTL %v is under 1s", ttl)
	}
	return &Membership{q: q, dialect: d, fleet: fleet, self: self, ttl: ttl}, nil
}

// Self is this member's id.
func (m *Membership) Self() string { return m.self }

var membershipSQL = map[store.Dialect]struct{ beat, live, leave, prune string }{
	store.Postgres: {
		beat: `INSERT INTO outbox_fleet_members (fleet, member_id, seen_at) VALUES ($1, $2, now())
			ON CONFLICT (fleet, member_id) DO UPDATE SET seen_at = now()`,
		live:  `SELECT member_id FROM outbox_fleet_members WHERE fleet = $1 AND seen_at > now() - $2 * interval '1 millisecond' ORDER BY member_id`,
		leave: `DELETE FROM outbox_fleet_members WHERE fleet = $1 AND member_id = $2`,
		prune: `DELETE FROM outbox_fleet_members WHERE fleet = $1 AND seen_at < now() - $2 * interval '1 millisecond'`,
	},
	store.MySQL: {
		beat: `INSERT INTO outbox_fleet_members (fleet, member_id, seen_at) VALUES (?, ?, NOW(6))
			ON DUPLICATE KEY UPDATE seen_at = NOW(6)`,
		live:  `SELECT member_id FROM outbox_fleet_members WHERE fleet = ? AND seen_at > NOW(6) - INTERVAL ? * 1000 MICROSECOND ORDER BY member_id`,
		leave: `DELETE FROM outbox_fleet_members WHERE fleet = ? AND member_id = ?`,
		prune: `DELETE FROM outbox_fleet_members WHERE fleet = ? AND seen_at < NOW(6) - INTERVAL ? * 1000 MICROSECOND`,
	},
	store.SQLite: {
		beat: `INSERT INTO outbox_fleet_members (fleet, member_id, seen_at) VALUES (?, ?, strftime('%Y-%m-%d %H:%M:%f', 'now'))
			ON CONFLICT (fleet, member_id) DO UPDATE SET seen_at = excluded.seen_at`,
		live:  `SELECT member_id FROM outbox_fleet_members WHERE fleet = ? AND seen_at > strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || (? / 1000.0) || ' seconds') ORDER BY member_id`,
		leave: `DELETE FROM outbox_fleet_members WHERE fleet = ? AND member_id = ?`,
		prune: `DELETE FROM outbox_fleet_members WHERE fleet = ? AND seen_at < strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || (? / 1000.0) || ' seconds')`,
	},
}

// Beat refreshes this member's row, and (at most once a minute) forgets
// members gone for a hundred TTLs. It is not safe for concurrent use.
func (m *Membership) Beat(ctx context.Context) error {
	s := membershipSQL[m.dialect]
	if _, err := m.q.Exec(ctx, s.beat, m.fleet, m.self); err != nil {
		return fmt.Errorf("fleet %s: heartbeat: %w", m.fleet, err)
	}
	if time.Since(m.pruned) < time.Minute {
		return nil
	}
	if _, err := m.q.Exec(ctx, s.prune, m.fleet, (100 * m.ttl).Milliseconds()); err != nil {
		return fmt.Errorf("fleet %s: forget old members: %w", m.fleet, err)
	}
	m.pruned = time.Now()
	return nil
}

// Live lists the members seen within the TTL, sorted.
func (m *Membership) Live(ctx context.Context) ([]string, error) {
	rows, err := m.q.Query(ctx, membershipSQL[m.dialect].live, m.fleet, m.ttl.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("fleet %s: members: %w", m.fleet, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("fleet %s: members: %w", m.fleet, err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("fleet %s: members: %w", m.fleet, err)
	}
	return out, nil
}

// Leave deletes this member's row, so that the others take its databases
// at once instead of after the TTL.
func (m *Membership) Leave(ctx context.Context) error {
	if _, err := m.q.Exec(ctx, membershipSQL[m.dialect].leave, m.fleet, m.self); err != nil {
		return fmt.Errorf("fleet %s: leave: %w", m.fleet, err)
	}
	return nil
}

var holdersSQL = map[store.Dialect]string{
	store.Postgres: `SELECT DISTINCT owner FROM outbox_leases WHERE owner IS NOT NULL AND expires_at > now() ORDER BY owner`,
	store.MySQL:    `SELECT DISTINCT owner FROM outbox_leases WHERE owner IS NOT NULL AND expires_at > NOW(6) ORDER BY owner`,
	store.SQLite:   `SELECT DISTINCT owner FROM outbox_leases WHERE owner IS NOT NULL AND expires_at > strftime('%Y-%m-%d %H:%M:%f', 'now') ORDER BY owner`,
}

// Holders lists the relays holding an unexpired partition lease in the
// database q reaches (of dialect d): who serves it now.
func Holders(ctx context.Context, q store.Querier, d store.Dialect) ([]string, error) {
	rows, err := q.Query(ctx, holdersSQL[d])
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}
