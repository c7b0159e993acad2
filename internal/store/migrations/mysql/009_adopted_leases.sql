-- outbox schema version 9 (MySQL/MariaDB): the leases of relays that
-- deliver from a local message table the application already writes
-- (outbox relay --adopt). One row per adopted table; its holder is the
-- one relay serving the table.
CREATE TABLE outbox_adopted_leases (
    table_name      VARCHAR(255) NOT NULL,
    partition_no    SMALLINT NOT NULL DEFAULT 0,
    owner           VARCHAR(255) NULL,
    prev_owner      VARCHAR(255) NULL,
    expires_at      TIMESTAMP(6) NOT NULL DEFAULT '1970-01-01 00:00:01',
    inflight_max_id BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (table_name, partition_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
