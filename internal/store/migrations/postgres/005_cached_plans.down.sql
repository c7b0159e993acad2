-- Undoes version 5: drops the settle function and puts back version 4's
-- read function.
DROP FUNCTION IF EXISTS outbox_settle(bigint[], text[], bigint[], text[], int[], boolean[], text);

CREATE OR REPLACE FUNCTION outbox_read(parts int[], lim int)
RETURNS TABLE (id bigint, message_id text, topic varchar, business_key varchar, payload text, headers text,
               attempts int, max_attempts int, partition_no smallint, unknown_outcome boolean, created_epoch float8)
LANGUAGE sql STABLE
SET enable_seqscan = off
SET enable_bitmapscan = off
SET jit = off
AS $$
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
$$;
