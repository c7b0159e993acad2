-- outbox schema version 9 (PostgreSQL): the leases of relays that deliver
-- from a local message table the application already writes (outbox
-- relay --adopt). One row per adopted table; its holder is the one relay
-- serving the table.
CREATE TABLE outbox_adopted_leases (
    table_name      TEXT NOT NULL,
    partition_no    SMALLINT NOT NULL DEFAULT 0,
    owner           TEXT NULL,
    prev_owner      TEXT NULL,
    expires_at      TIMESTAMPTZ NOT NULL DEFAULT 'epoch',
    inflight_max_id BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (table_name, partition_no)
);
