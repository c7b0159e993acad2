package store

import (
	"math"
	"strconv"
	"strings"
)

// statements holds every fixed statement of one dialect, as its
// statements_*.go file writes them, in three groups. The texts are fixed
// at start-up; nothing from users is ever spliced into them.
type statements struct {
	messageStatements
	relayStatements
	adminStatements
}

// messageStatements are the hot path's.
type messageStatements struct {
	// insert takes the dialect's batch argument form (see insertBatch).
	insert string
	// insertOne is insert for a single message, with one argument per
	// column: cheaper to encode and to run than the batch form, and the
	// common case (one message per business transaction).
	insertOne string
	// insertFresh is insertOne for a message whose id was just generated:
	// on PostgreSQL, without ON CONFLICT (an arbiter-index probe and a
	// speculative insertion per row that such an id never needs).
	insertFresh string
	// read: owner-independent ready rows of the given partitions, oldest
	// first, skipping keys held back by an earlier waiting message.
	read string
	// readInline is read as one statement; on PostgreSQL read calls the
	// function outbox_read, whose body is this statement (tests hold the
	// two together and EXPLAIN this one with the function's settings).
	readInline string
	// readMark is read that also writes the in-flight marks of the rows
	// it returns (markInflight), in one statement: parts, limit, owner.
	// "" where the dialect has none: ReadMark runs read, then markInflight.
	readMark string
	// settle applies outcomes, fenced by the caller's leases.
	settle string
	// settleReadMark is settle, then readMark, in one call: the outcome
	// arrays and owner as settle takes them, then parts and limit. Its
	// first row carries the settle's count (see SettleReadMark). "" where
	// the dialect has none.
	settleReadMark string
	// settleInline is settle as one statement; on PostgreSQL settle calls
	// the function outbox_settle, whose body is this statement.
	settleInline string
	// expire moves the pending rows of the owner's leased partitions
	// whose expires_at has come to expired (owner).
	expire string
	// markInflight records, per partition, the highest id a relay is
	// about to publish (owner, partitions, ids).
	markInflight string
}

// relayStatements are the relays' registry, their leases and their views
// of the routes.
type relayStatements struct {
	// registerRelay records a relay's heartbeat and route patterns (id,
	// routes, source: the adopted table it serves, NULL for
	// outbox_messages); liveRelays lists the relays of outbox_messages
	// seen within a time (id, routes); relays lists every registered relay
	// with the seconds since its heartbeat, by database time, and its
	// source.
	registerRelay string
	liveRelays    string
	relays        string
	dropRelay     string
	pruneRelays   string
	partitions    string
	acquire       string
	held          string
	renew         string
	release       string
	releaseAll    string

	// recordRoute writes a relay's view of a route (relay, route, state,
	// reason); routeHealth lists the views of live relays with their age
	// in seconds by database time; dropRouteHealth forgets a relay's.
	recordRoute     string
	routeHealth     string
	dropRouteHealth string
}

// adminStatements are the inbox's, the operators' counts and gauges, and
// the schema's bookkeeping.
type adminStatements struct {
	inboxClaim string
	inboxPurge string

	countByStatusTopic string
	oldestPending      string
	// oldestDue is how long the pending row that fell due first has been
	// due (NULL when none is due), through the due-rows index.
	oldestDue string
	now       string
	// gauges samples the relay's gauges in one round trip. Each part
	// reads an index built for it, so the cost follows the number of
	// pending and dead rows, never the sent ones:
	//   - pending count: the pending-rows index (partial on PostgreSQL and
	//     SQLite, (status, id) on MySQL);
	//   - dead count: the status/topic index (partial, dead and consumed rows, on
	//     PostgreSQL);
	//   - oldest pending: the lowest pending id through the pending-rows
	//     index, then that row's created_at against the database clock;
	//   - oldest due: the first entry of the due-rows index (pending rows
	//     by available_at) that has come, against the database clock;
	//   - the database clock itself, for the relay's latency figures.
	gauges string

	// migrationsTable creates outbox_schema_migrations.
	migrationsTable string
	// tableExists counts the tables named by its one argument.
	tableExists string
}

// singleForm fills the statements PostgreSQL keeps in a second form
// (insertFresh, readInline, settleInline) with their one form, for the
// dialects that have only that.
func singleForm(s statements) statements {
	s.insertFresh, s.readInline, s.settleInline = s.insertOne, s.read, s.settle
	return s
}

// expiredReason begins the last_error of an expired message.
const expiredReason = "expired: its expires_at came before it was delivered"

// Statements every dialect writes alike.
const (
	partitionsSQL         = `SELECT count(*) FROM outbox_leases`
	countByStatusTopicSQL = `SELECT status, topic, count(*) FROM outbox_messages GROUP BY status, topic ORDER BY status, topic`
	// archiveColumns are the columns outbox_messages and its archive share.
	archiveColumns = "id, message_id, topic, business_key, payload, headers, status, attempts, max_attempts, available_at, created_at, sent_at, consumed_at, last_error, unknown_outcome"
)

// routeHealthSQL lists the route views of live relays; age is the
// dialect's seconds-since expression for h.since.
func routeHealthSQL(age string) string {
	return `SELECT h.route, h.relay_id, h.state, ` + age + `, h.reason
FROM outbox_route_health AS h JOIN outbox_relays AS r ON r.relay_id = h.relay_id
ORDER BY h.route, h.relay_id`
}

// relaysSQL lists the registered relays; age is the dialect's
// seconds-since expression for seen_at.
func relaysSQL(age string) string {
	return `SELECT relay_id, routes, ` + age + `, source FROM outbox_relays ORDER BY relay_id`
}

const dropRouteHealthSQL = `DELETE FROM outbox_route_health WHERE relay_id = `

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// placeholders is n "{}" separated by commas, for an IN list.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("{}, ", n), ", ")
}

// placeholdersQ is n "?" separated by commas, for an IN list of MySQL's
// statements.
// Bind writes q's "?" placeholders as d wants them: $1, $2, … on
// PostgreSQL, unchanged elsewhere.
func Bind(d Dialect, q string) string {
	if d != Postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func placeholdersQ(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }

// oneArgs are the insertOne arguments in column order (message id, topic,
// key, payload, headers, max attempts, delay and not-before in
// microseconds), NULL where m leaves a column to its default.
func oneArgs(m *NewMessage) []any {
	var id, key, maxAttempts, notBefore any
	if m.MessageID != "" {
		id = m.MessageID
	}
	if m.Key != "" {
		key = m.Key
	}
	if m.MaxAttempts > 0 {
		maxAttempts = int32(min(m.MaxAttempts, math.MaxInt32))
	}
	if !m.NotBefore.IsZero() {
		notBefore = m.NotBefore.UnixMicro()
	}
	return []any{id, m.Topic, key, m.Payload, m.Headers, maxAttempts, m.Delay.Microseconds(), notBefore}
}
