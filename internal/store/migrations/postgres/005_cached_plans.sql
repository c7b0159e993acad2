-- The relay's read and settle as PL/pgSQL functions, each planned once per
-- connection. A LANGUAGE sql function that cannot be inlined (it carries
-- settings) is parsed and planned again on every call, and a prepared
-- settle is too: its custom plan for a handful of outcomes always looks
-- cheaper than the generic one. Each plan costs more server CPU than
-- running the statement (about 150 µs of each), and a relay on a trickling
-- outbox runs both hundreds of times a second. PL/pgSQL keeps its plans for
-- the life of the connection; plan_cache_mode makes them the generic plans,
-- which the other settings pin to the indexes for every backlog, every set
-- of partitions and every batch size.
CREATE OR REPLACE FUNCTION outbox_read(parts int[], lim int)
RETURNS TABLE (id bigint, message_id text, topic varchar, business_key varchar, payload text, headers text,
               attempts int, max_attempts int, partition_no smallint, unknown_outcome boolean, created_epoch float8)
LANGUAGE plpgsql STABLE
SET enable_seqscan = off
SET enable_bitmapscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
RETURN QUERY
SELECT m.id, m.message_id::text, m.topic, m.business_key, m.payload, m.headers::text, m.attempts, m.max_attempts,
       m.partition_no, m.unknown_outcome, extract(epoch from m.created_at)::float8
FROM outbox_messages AS m
WHERE m.status = 'pending' AND m.available_at <= now() AND m.partition_no = ANY(parts)
  AND (m.business_key IS NULL OR NOT EXISTS (
      SELECT 1 FROM outbox_messages AS b
      WHERE b.business_key = m.business_key AND b.status = 'pending' AND b.available_at > b.created_at
        AND b.business_key IS NOT NULL AND b.id < m.id AND b.available_at > now()))
ORDER BY m.id
LIMIT lim;
END
$$;

-- Applies outcomes (ids, statuses, backoff delays in µs, errors, attempt
-- increments, unknown-outcome flags) to pending rows of partitions the
-- owner's unexpired leases hold, and returns how many rows it changed.
-- Its transaction commits without waiting for the WAL flush: a database
-- crash may forget the last moments of settles, and what it forgets is
-- delivered again (a duplicate, as at-least-once allows), never marked
-- sent unconfirmed.
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
WHERE m.id = u.id AND m.status = 'pending'
  AND (SELECT l.owner = owner_id AND l.expires_at > now() FROM outbox_leases AS l WHERE l.partition_no = m.partition_no);
GET DIAGNOSTICS n = ROW_COUNT;
RETURN n;
END
$$;
