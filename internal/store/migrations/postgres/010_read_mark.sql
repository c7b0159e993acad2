-- outbox schema version 10 (PostgreSQL 12+): the relay's read and its
-- in-flight mark in one call. A round read its batch, then recorded in the
-- leases the highest id it was about to publish from each partition
-- (crash isolation, the Checker's suspects), then settled: three round
-- trips and three statements to parse, execute and commit. outbox_read_mark
-- reads as outbox_read does and, in the same statement, raises the mark of
-- each partition it read a higher id from (on the leases owner_id holds).
-- A mark is never lowered here: a partition that gave nothing keeps its
-- mark, which then covers only rows already published at least once (the
-- rows up to it that are still pending wait for a retry), so a relay
-- taking the partition over after a crash suspects them too and asks the
-- Checker first; lowering it would cost a second lease write per partition
-- and round. Like the settle, it commits without waiting for the WAL
-- flush: a mark lost to a database crash only means its messages are
-- published again without being suspected first.
CREATE OR REPLACE FUNCTION outbox_read_mark(parts int[], lim int, owner_id text)
RETURNS TABLE (id bigint, message_id text, topic varchar, business_key varchar, payload text, headers text,
               attempts int, max_attempts int, partition_no smallint, unknown_outcome boolean, created_epoch float8)
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
    SELECT m.id, m.message_id::text, m.topic, m.business_key, m.payload, m.headers::text, m.attempts, m.max_attempts,
           m.partition_no, m.unknown_outcome, extract(epoch from m.created_at)::float8
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
    -- renewal locks them: two statements taking row locks in different
    -- orders can deadlock, and PostgreSQL takes deadlock_timeout (1 s)
    -- to find out.
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
