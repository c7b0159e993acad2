-- outbox schema version 6 (SQLite): pending rows by the time they fall
-- due, so the relay's sample of "how long has the oldest due message
-- waited" (outbox_oldest_due_age_seconds) reads one index entry however
-- large the backlog.
CREATE INDEX outbox_messages_due_idx ON outbox_messages (available_at) WHERE status = 'pending';
