-- Undoes version 17: the reads without a payload bound, and the settle of
-- version 12 (a dead row keeps the time its last attempt fell due).
DROP FUNCTION IF EXISTS outbox_settle_read_mark(bigint[], text[], bigint[], text[], int[], boolean[], text, int[], int, bigint);
DROP FUNCTION IF EXISTS outbox_read_mark(int[], int, text, bigint);
DROP FUNCTION IF EXISTS outbox_read(int[], int, bigint);
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
