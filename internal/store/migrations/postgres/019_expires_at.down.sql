-- Undoes version 19: expired messages become dead letters (their
-- last_error says they expired), expires_at goes, and the functions are
-- version 17's again.
UPDATE outbox_messages SET status = 'dead' WHERE status = 'expired';
DROP INDEX IF EXISTS outbox_messages_expiring_idx;
ALTER TABLE outbox_messages DROP CONSTRAINT outbox_messages_status_check;
ALTER TABLE outbox_messages ADD CONSTRAINT outbox_messages_status_check
    CHECK (status IN ('pending', 'sent', 'consumed', 'dead'));
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
    available_at = CASE WHEN u.status = 'pending' THEN now() + u.delay_us * interval '1 microsecond'
                        WHEN u.status = 'dead' THEN now() ELSE m.available_at END,
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

CREATE OR REPLACE FUNCTION outbox_read(parts int[], lim int, max_bytes bigint)
RETURNS TABLE (id bigint, message_id text, topic varchar, business_key varchar, payload text, headers text,
               attempts int, max_attempts int, partition_no smallint, unknown_outcome boolean, created_epoch float8,
               payload_bytes bigint)
LANGUAGE plpgsql STABLE
SET enable_seqscan = off
SET enable_bitmapscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
RETURN QUERY
SELECT m.id, m.message_id::text, m.topic, m.business_key, CASE WHEN octet_length(m.payload) <= max_bytes THEN m.payload END,
       m.headers::text, m.attempts, m.max_attempts, m.partition_no, m.unknown_outcome, extract(epoch from m.created_at)::float8,
       octet_length(m.payload)::bigint
FROM outbox_messages AS m
WHERE m.status = 'pending' AND m.available_at <= now() AND m.partition_no = ANY(parts)
  AND (m.business_key IS NULL OR NOT EXISTS (
      SELECT 1 FROM outbox_messages AS b
      WHERE b.business_key = m.business_key AND b.status = 'pending' AND b.available_at > b.created_at AND b.business_key IS NOT NULL
        AND b.id < m.id AND b.available_at > now()))
ORDER BY m.id
LIMIT lim;
END
$$;

CREATE OR REPLACE FUNCTION outbox_read_mark(parts int[], lim int, owner_id text, max_bytes bigint)
RETURNS TABLE (id bigint, message_id text, topic varchar, business_key varchar, payload text, headers text,
               attempts int, max_attempts int, partition_no smallint, unknown_outcome boolean, created_epoch float8,
               payload_bytes bigint)
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
SET enable_bitmapscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
PERFORM set_config('synchronous_commit', 'off', true);
RETURN QUERY
WITH r AS MATERIALIZED (
    SELECT m.id, m.message_id::text, m.topic, m.business_key, CASE WHEN octet_length(m.payload) <= max_bytes THEN m.payload END,
           m.headers::text, m.attempts, m.max_attempts, m.partition_no, m.unknown_outcome, extract(epoch from m.created_at)::float8,
           octet_length(m.payload)::bigint
    FROM outbox_messages AS m
    WHERE m.status = 'pending' AND m.available_at <= now() AND m.partition_no = ANY(parts)
      AND (m.business_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM outbox_messages AS b
          WHERE b.business_key = m.business_key AND b.status = 'pending' AND b.available_at > b.created_at
            AND b.business_key IS NOT NULL AND b.id < m.id AND b.available_at > now()))
    ORDER BY m.id
    LIMIT lim
), x AS MATERIALIZED (
    SELECT r.partition_no AS p, max(r.id) AS max_id FROM r GROUP BY r.partition_no
), locked AS MATERIALIZED (
    -- The lease rows to write, locked in partition order, as the lease
    -- renewal locks them (see 010_read_mark.sql).
    SELECT l.partition_no AS p FROM outbox_leases AS l JOIN x ON x.p = l.partition_no
    WHERE l.owner = owner_id AND l.inflight_max_id < x.max_id
    ORDER BY l.partition_no
    FOR UPDATE OF l
), marked AS (
    UPDATE outbox_leases AS l SET inflight_max_id = x.max_id
    FROM x JOIN locked ON locked.p = x.p
    WHERE l.partition_no = x.p
    RETURNING 1
)
SELECT r.* FROM r ORDER BY r.id;
END
$$;

ALTER TABLE outbox_messages DROP COLUMN expires_at;
