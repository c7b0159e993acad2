-- The snapshot read path (PostgreSQL 13+): the relay reads the messages
-- that committed between two transaction snapshots, and a message it
-- delivers is not written.
--
-- Each new row records the transaction that wrote it (outbox_txid). A
-- relay keeps, per partition, the snapshot up to which it has read (the
-- cursor, persisted in outbox_leases); the next batch is every row whose
-- transaction a new snapshot sees and the cursor's did not, so a row that
-- commits late is read once its transaction is visible, never skipped.
--
-- Rows are in one of two domains:
--   * outbox_txid NOT NULL: the snapshot domain. A pending row there is
--     delivered once the cursor of its partition has passed it; it keeps
--     status 'pending' and is never written for it.
--   * outbox_txid NULL: the table domain, read by status and
--     available_at as before: rows written before this step, retries,
--     dead letters, rows held back by an earlier message of their key,
--     delayed or expiring rows, and the window of a relay that stopped
--     without handing its partitions over. Every relay write that is not
--     "sent" moves a row here.
--
-- Idempotent: it runs again without harm.
ALTER TABLE outbox_messages ADD COLUMN IF NOT EXISTS outbox_txid xid8;
-- Rows already there stay in the table domain (NULL); only new rows get
-- their transaction.
ALTER TABLE outbox_messages ALTER COLUMN outbox_txid SET DEFAULT pg_current_xact_id();
CREATE INDEX IF NOT EXISTS outbox_messages_txid_idx ON outbox_messages (outbox_txid, id) WHERE outbox_txid IS NOT NULL;
CREATE INDEX IF NOT EXISTS outbox_messages_retry_idx ON outbox_messages (id) WHERE status = 'pending' AND outbox_txid IS NULL;
-- Pending rows of the table domain hold back later rows of their key: a
-- row written before this step whose available_at is its created_at
-- would not be found by outbox_messages_waiting_idx.
UPDATE outbox_messages SET available_at = created_at + interval '1 microsecond'
WHERE status = 'pending' AND outbox_txid IS NULL AND available_at <= created_at AND business_key IS NOT NULL;

-- A row whose status leaves 'pending' by any update (a dead letter, an
-- expiry, an operator's statement) leaves the snapshot domain with it, so
-- that once requeued it is read again from the table domain.
CREATE OR REPLACE FUNCTION outbox_leave_snapshot() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
NEW.outbox_txid := NULL;
RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS outbox_leave_snapshot ON outbox_messages;
CREATE TRIGGER outbox_leave_snapshot BEFORE UPDATE OF status ON outbox_messages FOR EACH ROW
    WHEN (NEW.status <> 'pending' AND NEW.outbox_txid IS NOT NULL) EXECUTE FUNCTION outbox_leave_snapshot();

ALTER TABLE outbox_leases ADD COLUMN IF NOT EXISTS snap_lo pg_snapshot;
ALTER TABLE outbox_leases ADD COLUMN IF NOT EXISTS snap_hi pg_snapshot;
ALTER TABLE outbox_leases ADD COLUMN IF NOT EXISTS snap_after_txid xid8;
ALTER TABLE outbox_leases ADD COLUMN IF NOT EXISTS snap_after_id bigint;
ALTER TABLE outbox_leases ADD COLUMN IF NOT EXISTS snap_boot bigint;

-- A transaction id is never given twice while the server runs, but
-- after a crash the ids of transactions whose WAL was never flushed
-- (rolled back) are given again, and after a failover those the standby
-- never got. A cursor taken before would see such a new transaction as
-- finished. The read makes that impossible on one server: it commits
-- durably after taking its snapshot, which flushes the WAL of every
-- transaction the snapshot sees as finished (see outbox_snapshot_read),
-- and with a synchronous standby it waits for the standby too. A cursor
-- of another timeline (a promoted standby, a restored backup) counts
-- only up to its xmin: the rows after are read again (at least once).
-- Behind an asynchronous standby that is not enough to cover every
-- transaction the standby missed (docs/snapshot-read.md).
CREATE OR REPLACE FUNCTION outbox_server_boot() RETURNS bigint
LANGUAGE sql VOLATILE
AS $$
SELECT CASE WHEN pg_is_in_recovery() THEN NULL
            ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint END
$$;

CREATE OR REPLACE FUNCTION outbox_snapshot_lo(lo pg_snapshot, boot bigint) RETURNS pg_snapshot
LANGUAGE sql VOLATILE
AS $$
SELECT CASE WHEN lo IS NULL OR boot IS NOT DISTINCT FROM outbox_server_boot() THEN lo
            ELSE (pg_snapshot_xmin(lo)::text || ':' || pg_snapshot_xmin(lo)::text || ':')::pg_snapshot END
$$;

-- outbox_snapshot_read reads the next page of the snapshot domain for the
-- partitions whose cursor is given (los[p+1] the snapshot read up to,
-- NULL: from the start; his[p+1] the end of the batch being paged, NULL:
-- now; ats[p+1], ais[p+1] the last row of the batch read, NULL: none;
-- incl[p+1] whether p is read), in transaction then id order, up to lim
-- rows. lo_x and hi_x bound the index scan (the least xmax of the los,
-- or last row read, and the greatest xmax of the his); xips are the
-- transactions the los saw in progress. A row that cannot be delivered now (not
-- pending any more, not yet due, expired, or an earlier row of its key is
-- pending in the table domain) is moved to the table domain (spill
-- 'true'); the others come with their payload as outbox_read_mark's. The
-- snapshot now is in every row (cur), and in a row of id 0 when the page
-- is empty. Its plan is pinned to the transaction id index (no sort), as
-- planned on an empty table it would read the whole table in id order.
CREATE OR REPLACE FUNCTION outbox_snapshot_read(los text[], his text[], ats text[], ais bigint[], incl boolean[],
                                                lo_x xid8, hi_x xid8, lim int, max_bytes bigint, boots bigint[],
                                                keep int[], owner_id text, xips xid8[])
RETURNS TABLE (id bigint, message_id text, topic varchar, business_key varchar, payload text, headers text,
               attempts int, max_attempts int, partition_no smallint, unknown_outcome boolean, created_epoch float8,
               payload_bytes bigint, txid text, spill text, cur text, boot text)
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
SET enable_bitmapscan = off
SET enable_sort = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    now_snap pg_snapshot := pg_current_snapshot();
    -- Every transaction now_snap sees as finished wrote its WAL before
    -- this position.
    now_wal pg_lsn := pg_current_wal_insert_lsn();
    cur_boot bigint := outbox_server_boot();
    p int;
BEGIN
-- The caller's next cursors come from now_snap, whose finished
-- transactions wrote their WAL before now_wal: unless the WAL is flushed
-- that far before the caller acts on this read, a crash could give their
-- ids again, to transactions those cursors would take for read. (A check
-- after the crash would not do: the server writes new WAL over the lost
-- positions.) So unless the producers' commits have already flushed past
-- it, this read commits durably (synchronous_commit on, with a write).
IF pg_current_wal_flush_lsn() < now_wal THEN
    PERFORM set_config('synchronous_commit', 'on', true);
    IF cardinality(keep) = 0 THEN
        keep := ARRAY(SELECT u.i - 1 FROM unnest(incl) WITH ORDINALITY AS u(inc, i) WHERE u.inc LIMIT 1);
    END IF;
ELSE
    PERFORM set_config('synchronous_commit', 'off', true);
END IF;
-- The cursors of keep (the partitions whose last round delivered
-- something) are recorded on owner_id's leases, locked in partition
-- order as the renewal locks them: a crash costs about a round.
PERFORM 1 FROM outbox_leases AS o WHERE o.partition_no = ANY(keep) AND o.owner = owner_id
ORDER BY o.partition_no FOR UPDATE;
UPDATE outbox_leases AS o SET snap_lo = los[o.partition_no + 1]::pg_snapshot, snap_hi = his[o.partition_no + 1]::pg_snapshot,
    snap_after_txid = ats[o.partition_no + 1]::xid8, snap_after_id = ais[o.partition_no + 1], snap_boot = boots[o.partition_no + 1]
WHERE o.partition_no = ANY(keep) AND o.owner = owner_id AND o.expires_at > now();
-- Cursors of another boot count only up to their xmin (see
-- outbox_snapshot_lo); the batch they were paging starts again.
FOR p IN SELECT u.i FROM unnest(incl, boots) WITH ORDINALITY AS u(inc, b, i)
         WHERE u.inc AND u.b IS DISTINCT FROM cur_boot AND los[u.i] IS NOT NULL LOOP
    los[p] := outbox_snapshot_lo(los[p]::pg_snapshot, boots[p])::text;
    his[p] := NULL;
    ats[p] := NULL;
    ais[p] := NULL;
    lo_x := least(lo_x, pg_snapshot_xmin(los[p]::pg_snapshot));
END LOOP;
RETURN QUERY
WITH c AS MATERIALIZED (
    -- The rows after lo_x (the cursors' xmax, or the last row read), and
    -- those of the transactions the cursors saw in progress (xips): the
    -- rows between a cursor's xmin and xmax are otherwise its own, which
    -- a transaction left open would make a long walk.
    (SELECT m.id, m.outbox_txid FROM outbox_messages AS m
    WHERE m.outbox_txid >= lo_x AND m.outbox_txid < greatest(hi_x, pg_snapshot_xmax(now_snap))
      AND incl[m.partition_no + 1]
      AND pg_visible_in_snapshot(m.outbox_txid, coalesce(his[m.partition_no + 1]::pg_snapshot, now_snap))
      AND (los[m.partition_no + 1] IS NULL OR NOT pg_visible_in_snapshot(m.outbox_txid, los[m.partition_no + 1]::pg_snapshot))
      AND (ats[m.partition_no + 1] IS NULL
           OR (m.outbox_txid, m.id) > (ats[m.partition_no + 1]::xid8, ais[m.partition_no + 1]))
    ORDER BY m.outbox_txid, m.id
    LIMIT lim)
    UNION ALL
    (SELECT m.id, m.outbox_txid FROM outbox_messages AS m
    WHERE m.outbox_txid = ANY(xips) AND m.outbox_txid < lo_x
      AND incl[m.partition_no + 1]
      AND pg_visible_in_snapshot(m.outbox_txid, coalesce(his[m.partition_no + 1]::pg_snapshot, now_snap))
      AND (los[m.partition_no + 1] IS NULL OR NOT pg_visible_in_snapshot(m.outbox_txid, los[m.partition_no + 1]::pg_snapshot))
      AND (ats[m.partition_no + 1] IS NULL
           OR (m.outbox_txid, m.id) > (ats[m.partition_no + 1]::xid8, ais[m.partition_no + 1]))
    ORDER BY m.outbox_txid, m.id
    LIMIT lim)
), w AS MATERIALIZED (
    SELECT m.id, m.outbox_txid, m.partition_no,
           (m.status <> 'pending' OR m.available_at > now() OR (m.expires_at IS NOT NULL AND m.expires_at <= now())
            OR (m.business_key IS NOT NULL AND EXISTS (
                -- Found through outbox_messages_waiting_idx by key: the
                -- domain is tested in a form no index matches.
                SELECT 1 FROM outbox_messages AS b
                WHERE b.business_key = m.business_key AND b.status = 'pending' AND b.available_at > b.created_at
                  AND b.business_key IS NOT NULL AND b.id < m.id AND (b.outbox_txid IS NULL) IS TRUE))) AS held
    FROM (SELECT c.id FROM c ORDER BY c.outbox_txid, c.id LIMIT lim) AS k
    -- Each row looked up by its id, in a subquery of its own (LIMIT 1
    -- keeps it one): planned as a join on the statistics of an empty
    -- table, the lookup walks the whole primary key for every row.
    CROSS JOIN LATERAL (SELECT r.id, r.outbox_txid, r.partition_no, r.status, r.available_at, r.expires_at, r.business_key
                        FROM outbox_messages AS r WHERE r.id = k.id LIMIT 1) AS m
), moved AS (
    -- Moved rows stay due when they were (a held-back key's row is read
    -- again right after the row holding it), and land where
    -- outbox_messages_waiting_idx finds them. Looked up by their ids
    -- (the status in a form no partial index matches): a plan made on an
    -- empty table would otherwise walk every pending row for the page's
    -- few.
    UPDATE outbox_messages AS m
    SET outbox_txid = NULL, available_at = greatest(m.available_at, now(), m.created_at + interval '1 microsecond')
    WHERE m.id = ANY (ARRAY(SELECT w.id FROM w WHERE w.held)) AND (m.status = 'pending') IS TRUE
    RETURNING m.id
)
SELECT w.id, m.message_id::text, m.topic, m.business_key,
       CASE WHEN NOT w.held AND octet_length(m.payload) <= max_bytes THEN m.payload END,
       m.headers::text, m.attempts, m.max_attempts, m.partition_no, m.unknown_outcome, extract(epoch from m.created_at)::float8,
       octet_length(m.payload)::bigint, w.outbox_txid::text, w.held::text, now_snap::text, cur_boot::text
FROM w CROSS JOIN LATERAL (SELECT r.message_id, r.topic, r.business_key, r.payload, r.headers, r.attempts, r.max_attempts,
                                   r.partition_no, r.unknown_outcome, r.created_at
                            FROM outbox_messages AS r WHERE r.id = w.id LIMIT 1) AS m
UNION ALL
SELECT 0::bigint, ''::text, ''::varchar, NULL::varchar, NULL::text, '{}'::text, 0, 0, 0::smallint, false, NULL::float8,
       0::bigint, ''::text, 'true'::text, now_snap::text, cur_boot::text;
END
$$;

-- outbox_read_retries is outbox_read_mark over the table domain.
CREATE OR REPLACE FUNCTION outbox_read_retries(parts int[], lim int, owner_id text, max_bytes bigint)
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
    WHERE m.status = 'pending' AND m.outbox_txid IS NULL AND m.available_at <= now() AND m.partition_no = ANY(parts)
      AND (m.expires_at IS NULL OR m.expires_at > now())
      AND (m.business_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM outbox_messages AS b
          WHERE b.business_key = m.business_key AND b.status = 'pending' AND b.available_at > b.created_at
            AND b.business_key IS NOT NULL AND b.id < m.id AND b.available_at > now()
            AND (b.expires_at IS NULL OR b.expires_at > now())))
    ORDER BY m.id
    LIMIT lim
), x AS MATERIALIZED (
    SELECT r.partition_no AS p, max(r.id) AS max_id FROM r GROUP BY r.partition_no
), locked AS MATERIALIZED (
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

-- outbox_settle_snapshot is outbox_settle that moves every row it writes
-- to the table domain. The relay does not call it for a delivered row of
-- the snapshot domain.
CREATE OR REPLACE FUNCTION outbox_settle_snapshot(ids bigint[], statuses text[], delays bigint[], errs text[], incs int[],
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
    available_at = CASE WHEN u.status = 'pending' THEN greatest(now() + u.delay_us * interval '1 microsecond', m.created_at + interval '1 microsecond')
                        WHEN u.status = 'dead' THEN now() ELSE m.available_at END,
    sent_at = CASE WHEN u.status = 'sent' THEN now() ELSE m.sent_at END,
    last_error = CASE WHEN u.status = 'sent' THEN m.last_error ELSE u.err END,
    unknown_outcome = u.unknown,
    status = u.status,
    outbox_txid = NULL
FROM unnest(ids, statuses, delays, errs, incs, unknowns) AS u(id, status, delay_us, err, inc, unknown)
WHERE m.id = u.id AND (m.status COLLATE "C" = 'pending' OR (m.status COLLATE "C" = 'expired' AND u.status <> 'pending'))
  AND (SELECT l.owner = owner_id AND l.expires_at > now() FROM outbox_leases AS l WHERE l.partition_no = m.partition_no);
GET DIAGNOSTICS n = ROW_COUNT;
RETURN n;
END
$$;

-- outbox_snapshot_resume returns owner's cursors of parts. For each
-- partition whose previous owner stopped without handing it over
-- (spill[i]), the rows that owner may have been publishing (the first
-- lim rows of the snapshot domain after its last recorded cursor, which
-- its round in flight read) move to the table domain first, and the
-- partition's in-flight mark becomes the highest of their ids, so that
-- they are read as suspects; the rows after them are read again from the
-- cursor (at least once).
CREATE OR REPLACE FUNCTION outbox_snapshot_resume(parts int[], spill boolean[], owner_id text, lim int)
RETURNS TABLE (partition_no smallint, lo text, hi text, after_txid text, after_id bigint, inflight_max_id bigint, boot bigint)
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
SET enable_bitmapscan = off
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    l record;
    top bigint;
BEGIN
FOR l IN SELECT o.partition_no, outbox_snapshot_lo(o.snap_lo, o.snap_boot) AS snap_lo, u.spill FROM outbox_leases AS o
         JOIN unnest(parts, spill) AS u(p, spill) ON u.p = o.partition_no
         WHERE o.owner = owner_id AND o.expires_at > now() AND u.spill
         ORDER BY o.partition_no
         FOR UPDATE OF o LOOP
    WITH w AS MATERIALIZED (
        SELECT m.id FROM outbox_messages AS m
        WHERE m.outbox_txid >= coalesce(pg_snapshot_xmin(l.snap_lo), '0'::xid8) AND m.partition_no = l.partition_no
          AND m.status = 'pending' AND NOT outbox_delivered(m.partition_no, m.outbox_txid, m.id)
        ORDER BY m.outbox_txid, m.id
        LIMIT lim
    ), moved AS (
        UPDATE outbox_messages AS m
        SET outbox_txid = NULL, available_at = greatest(m.available_at, now(), m.created_at + interval '1 microsecond')
        WHERE m.id = ANY (ARRAY(SELECT w.id FROM w))
        RETURNING m.id)
    SELECT max(moved.id) INTO top FROM moved;
    UPDATE outbox_leases AS o SET inflight_max_id = greatest(o.inflight_max_id, coalesce(top, 0))
    WHERE o.partition_no = l.partition_no;
END LOOP;
RETURN QUERY
SELECT o.partition_no, o.snap_lo::text, o.snap_hi::text, o.snap_after_txid::text, o.snap_after_id, o.inflight_max_id, o.snap_boot
FROM outbox_leases AS o
WHERE o.owner = owner_id AND o.expires_at > now() AND o.partition_no = ANY(parts)
ORDER BY o.partition_no;
END
$$;

-- outbox_delivered says whether a row of the snapshot domain (txid, id
-- in partition p) is behind its partition's recorded cursor: a pending
-- such row has been delivered. The cursors are recorded every lease tick
-- and when a relay hands a partition over, so the answer lags the relay
-- by that much.
CREATE OR REPLACE FUNCTION outbox_delivered(p smallint, txid xid8, row_id bigint)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
SELECT txid IS NOT NULL AND EXISTS (
    SELECT 1 FROM outbox_leases AS l
    WHERE l.partition_no = p
      AND (pg_visible_in_snapshot(txid, outbox_snapshot_lo(l.snap_lo, l.snap_boot))
           OR (l.snap_hi IS NOT NULL AND l.snap_boot = outbox_server_boot() AND pg_visible_in_snapshot(txid, l.snap_hi)
               AND (txid, row_id) <= (l.snap_after_txid, l.snap_after_id))))
$$;

-- outbox_snapshot_floor is the lowest transaction id a pending row of the
-- snapshot domain not yet delivered can have: the least xmin of the
-- recorded cursors, 0 while a partition has none.
CREATE OR REPLACE FUNCTION outbox_snapshot_floor()
RETURNS xid8
LANGUAGE sql STABLE
AS $$
SELECT CASE WHEN bool_or(snap_lo IS NULL) THEN '0'::xid8
            ELSE (SELECT pg_snapshot_xmin(l.snap_lo) FROM outbox_leases AS l ORDER BY 1 LIMIT 1) END
FROM outbox_leases
$$;
