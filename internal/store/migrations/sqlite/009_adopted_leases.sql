-- outbox schema version 9 (SQLite): the leases of relays that deliver
-- from a local message table the application already writes (outbox
-- relay --adopt). One row per adopted table; its holder is the one relay
-- serving the table.
CREATE TABLE outbox_adopted_leases (
    table_name      TEXT NOT NULL,
    partition_no    INTEGER NOT NULL DEFAULT 0,
    owner           TEXT NULL,
    prev_owner      TEXT NULL,
    expires_at      TEXT NOT NULL DEFAULT '1970-01-01 00:00:00.000',
    inflight_max_id INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (table_name, partition_no)
);
