-- outbox schema version 18 (PostgreSQL 11+): an idle relay is woken by
-- the commit of a row from any producer, plain SQL included, without
-- serializing the producers' commits under load.
--
-- A NOTIFY in a transaction takes a database-wide lock at commit that
-- serializes every notifying commit: at 64 writers it halves their
-- throughput. So the trigger notifies only while some relay has said it
-- is idle, by a row of its own in outbox_wake_wanted: a relay adds its row
-- when its reads have found nothing for a moment and removes it as soon
-- as messages arrive faster than one at a time. Under load the table is
-- empty and each INSERT statement pays one look into an empty table; at
-- a trickle each one notifies once (statement-level, and PostgreSQL sends
-- one notification per channel and payload per transaction). A relay
-- that stopped takes its row with it; one that died leaves it until
-- another relay prunes it with the dead relay's registration.
--
-- An adopted table (outbox relay --adopt) gets the same trigger from the
-- application's own migration: `outbox adopt sql` prints it. Without it
-- the relay probes the table instead (see outbox_relays.wake).
--
-- outbox_relays.wake records how each relay learns of new messages
-- between its polls ("notify", "probe 25ms", "poll"), for `outbox status`.
CREATE TABLE outbox_wake_wanted (
    relay_id VARCHAR(255) PRIMARY KEY,
    since    TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE FUNCTION outbox_notify_wake() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM outbox_wake_wanted) THEN
        PERFORM pg_notify('outbox_messages', CASE WHEN TG_TABLE_NAME = 'outbox_messages' THEN quote_ident(TG_TABLE_SCHEMA) ELSE '' END);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER outbox_messages_wake AFTER INSERT ON outbox_messages
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify_wake();

ALTER TABLE outbox_relays ADD COLUMN wake VARCHAR(64) NULL;
