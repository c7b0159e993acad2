-- outbox schema version 21 (PostgreSQL): the planner is told that business
-- keys are many. For each row it takes, the relay's read checks that no
-- earlier row of the same key waits for a retry, a probe of the key in
-- outbox_messages_waiting_idx. When ANALYZE sees a backlog of few keys (one
-- hot key), the planner takes a key for unselective, guesses that a third
-- of the pending rows wait (its default for available_at > created_at) and
-- walks the pending rows in id order for every row it checks instead: a
-- read of 1,000 rows of one key took 55-70 ms instead of under 1 ms. Over
-- the table's life keys are many; n_distinct = -0.5 (a key per two rows)
-- keeps the probe on the key's index entries, whatever the backlog.
ALTER TABLE outbox_messages ALTER COLUMN business_key SET (n_distinct = -0.5);
-- Statistics taken now, unless the table is empty (statistics of an
-- empty table would mislead the planner until the next ANALYZE).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM outbox_messages) THEN
        ANALYZE outbox_messages (business_key);
    END IF;
END
$$;
