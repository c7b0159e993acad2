-- outbox schema version 14 (PostgreSQL 12+): a round's settle and the next
-- round's read in one call. At an everyday rate a round carries a message
-- or two, and its settle was a statement and a commit of its own, as many
-- as the reads. outbox_settle_read_mark applies the outcomes as
-- outbox_settle does, then reads and marks as outbox_read_mark does; each
-- step sees what the one before wrote, so a row settled sent is not read
-- again, and a key whose message was just settled gives its next one. The
-- first row returned carries the settle's count in settled (id 0, every
-- other column empty); the rows read follow, with settled NULL.
CREATE OR REPLACE FUNCTION outbox_settle_read_mark(ids bigint[], statuses text[], delays bigint[], errs text[], incs int[],
                                                   unknowns boolean[], owner_id text, parts int[], lim int)
RETURNS TABLE (id bigint, message_id text, topic varchar, business_key varchar, payload text, headers text,
               attempts int, max_attempts int, partition_no smallint, unknown_outcome boolean, created_epoch float8,
               settled bigint)
LANGUAGE plpgsql VOLATILE
SET jit = off
AS $$
DECLARE
    n bigint;
BEGIN
n := outbox_settle(ids, statuses, delays, errs, incs, unknowns, owner_id);
RETURN QUERY SELECT 0::bigint, ''::text, ''::varchar, NULL::varchar, ''::text, ''::text, 0, 0, 0::smallint, false, 0::float8, n;
RETURN QUERY SELECT r.*, NULL::bigint FROM outbox_read_mark(parts, lim, owner_id) AS r;
END
$$;
