-- outbox schema version 21 (PostgreSQL, outbox_messages partitioned by
-- day): the planner is told that business keys are many (see
-- migrations/postgres/021_key_statistics.sql), on every day partition,
-- those made from now on too.
ALTER TABLE outbox_messages ALTER COLUMN business_key SET (n_distinct = -0.5);
DO $$
DECLARE
    part regclass;
BEGIN
    FOR part IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'outbox_messages'::regclass LOOP
        EXECUTE format('ALTER TABLE %s ALTER COLUMN business_key SET (n_distinct = -0.5)', part);
    END LOOP;
END
$$;
-- Statistics taken now, unless the table is empty (statistics of an
-- empty table would mislead the planner until the next ANALYZE).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM outbox_messages) THEN
        ANALYZE outbox_messages (business_key);
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION outbox_messages_add_partitions(first_day date, last_day date, lock_timeout_ms integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    day date;
    part text;
    made integer := 0;
BEGIN
    PERFORM set_config('lock_timeout', lock_timeout_ms || 'ms', true);
    FOR day IN SELECT generate_series(first_day, last_day, interval '1 day')::date LOOP
        part := 'outbox_messages_p' || to_char(day, 'YYYYMMDD');
        CONTINUE WHEN to_regclass(quote_ident(part)) IS NOT NULL;
        CONTINUE WHEN EXISTS (SELECT 1 FROM outbox_messages_default
                              WHERE message_id >= outbox_uuid_v7_floor(day) AND message_id < outbox_uuid_v7_floor(day + 1));
        EXECUTE format('CREATE TABLE %I PARTITION OF outbox_messages FOR VALUES FROM (%L) TO (%L)'
                       ' WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02,'
                       ' autovacuum_vacuum_insert_scale_factor = 0.02)',
                       part, outbox_uuid_v7_floor(day), outbox_uuid_v7_floor(day + 1));
        EXECUTE format('ALTER TABLE %I ALTER COLUMN business_key SET (n_distinct = -0.5)', part);
        made := made + 1;
    END LOOP;
    RETURN made;
END
$$;
