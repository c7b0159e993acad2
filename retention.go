package outbox

import (
	"time"

	"github.com/txoutbox/outbox/internal/relay"
	"github.com/txoutbox/outbox/internal/store"
)

// Retention defaults.
const (
	// DefaultRetentionSent is how long sent and consumed messages stay in
	// the table after they were sent (24 h).
	DefaultRetentionSent = relay.DefaultRetentionSent
	// DefaultRetentionDead is how long dead messages stay after their last
	// attempt, and expired messages after they expired (14 days).
	DefaultRetentionDead = relay.DefaultRetentionDead
	// DefaultRetentionBatchSize is how many rows one retention statement
	// looks at (1000).
	DefaultRetentionBatchSize = relay.DefaultRetentionBatchSize
	// DefaultRetentionInterval is the time between retention sweeps (1 min).
	DefaultRetentionInterval = relay.DefaultRetentionInterval
)

// RetentionConfig configures how a relay removes settled messages from
// outbox_messages. Retention is on by default: a RelayConfig without one
// removes sent and consumed messages a day after they were sent and dead
// ones 14 days after their last attempt (expired ones 14 days after they
// expired). Pending messages are never
// removed, however old.
//
// Only one relay at a time runs retention: the one holding partition 0.
// It walks the table's primary key from the low end in small batches (one
// short statement, or one short transaction, each), off the delivery path
// and without any index beyond the primary key, so producers and the relay
// pay nothing for it.
type RetentionConfig struct {
	// Sent is how long sent and consumed messages are kept, counted from
	// sent_at (when the destination confirmed the message; created_at for
	// a row without sent_at). Consuming a message does not extend it.
	// Defaults to DefaultRetentionSent (24 h).
	Sent time.Duration
	// Dead is how long dead messages are kept, counted from their last
	// attempt (available_at, when the final attempt fell due; created_at
	// if later). A dead message requeued and dead again starts over.
	// Expired messages are kept as long, counted from when the relay
	// moved them to expired.
	// Defaults to DefaultRetentionDead (14 days).
	Dead time.Duration
	// Archive moves the messages retention removes into outbox_messages_archive
	// (migration 3) instead of deleting them, each batch in one statement
	// or transaction: a message is in exactly one of the two tables. On a
	// partitioned table (`outbox migrate --partitioned`) a whole day
	// whose messages have all outlived their retention is kept as the table
	// outbox_messages_archive_YYYYMMDD instead of being dropped. Pruning
	// the archive is left to the operator. Defaults to false.
	Archive bool
	// BatchSize is how many rows one retention statement looks at.
	// Defaults to DefaultRetentionBatchSize (1000).
	BatchSize int
	// Interval is the time between sweeps. Defaults to
	// DefaultRetentionInterval (1 min).
	Interval time.Duration
	// Disabled turns retention off: settled messages stay until something
	// else removes them.
	Disabled bool
	// OnSweep, when set, is called after every sweep this relay ran, from
	// the retention goroutine. Keep it fast.
	OnSweep func(RetentionReport)
}

// RetentionReport describes one retention sweep.
type RetentionReport struct {
	// Relay is the id of the relay that ran the sweep.
	Relay string
	// Removed is how many messages the sweep deleted or archived.
	Removed int64
	// Archived is true when Removed went to outbox_messages_archive.
	Archived bool
	// Batches is how many retention statements (or transactions) ran.
	Batches int
	// Full is true when the sweep started from the lowest id still in the
	// table rather than from where the previous sweep stopped.
	Full bool
	// PartitionsDropped is how many day partitions of a partitioned table
	// the sweep dropped (or, archiving, kept as archive tables); their
	// rows count in Removed.
	PartitionsDropped int
	// PartitionsCreated is how many day partitions it created ahead.
	PartitionsCreated int
	// Err is the error that ended the sweep early, if any; retention tries
	// again at the next interval.
	Err error
}

// engine maps the configuration onto the engine's as given (nil: on,
// with the defaults).
func (c *RetentionConfig) engine() *relay.Retention {
	if c == nil {
		return &relay.Retention{}
	}
	rt := &relay.Retention{
		Policy:    store.RetentionPolicy{Sent: c.Sent, Dead: c.Dead, Archive: c.Archive},
		BatchSize: c.BatchSize,
		Interval:  c.Interval,
		Disabled:  c.Disabled,
	}
	if f := c.OnSweep; f != nil {
		rt.OnSweep = func(rep relay.RetentionReport) { f(RetentionReport(rep)) }
	}
	return rt
}
