-- outbox schema version 12 (PostgreSQL 12+): the settle finds its rows by
-- id whatever the statistics said when it was planned. outbox_settle keeps
-- one generic plan per connection, made at its first call; when the table's
-- statistics then showed few pending rows (a new outbox, or one analyzed
-- while it was empty), that plan walked every pending row through the
-- pending-rows index and joined the outcomes by filter, checking the lease
-- of each row on the way: one settle of one message cost as much as there
-- were pending rows (4 ms over 5,000), and after an outage, with a backlog
-- of a million, a settle was a full walk of it. The status is now
-- compared in the "C" collation (the same as the default for equality), so
-- that no partial index on pending rows matches the statement: what is
-- left is to look each outcome's row up by the primary key.
CREATE OR REPLACE FUNCTION outbox_settle(ids bigint[], statuses text[], delays bigint[], errs text[], incs int[],
                                         unknowns boolean[], owner_id text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
SET enable_bitmapscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    n bigint;
BEGIN
PERFORM set_config('synchronous_commit', 'off', true);
UPDATE outbox_messages AS m SET
    attempts = m.attempts + u.inc,
    available_at = CASE WHEN u.status = 'pending' THEN now() + u.delay_us * interval '1 microsecond' ELSE m.available_at END,
    sent_at = CASE WHEN u.status = 'sent' THEN now() ELSE m.sent_at END,
    last_error = CASE WHEN u.status = 'sent' THEN m.last_error ELSE u.err END,
    unknown_outcome = u.unknown,
    status = u.status
FROM unnest(ids, statuses, delays, errs, incs, unknowns) AS u(id, status, delay_us, err, inc, unknown)
WHERE m.id = u.id AND m.status COLLATE "C" = 'pending'
  AND (SELECT l.owner = owner_id AND l.expires_at > now() FROM outbox_leases AS l WHERE l.partition_no = m.partition_no);
GET DIAGNOSTICS n = ROW_COUNT;
RETURN n;
END
$$;
