-- outbox schema version 2 (MariaDB 10.6+, MySQL 8+): what operators changed
-- through the admin API and the command line.
CREATE TABLE outbox_audit (
    id     BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at     TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    actor  VARCHAR(255) NOT NULL,
    action VARCHAR(32) NOT NULL,
    target TEXT NOT NULL,
    count  BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
