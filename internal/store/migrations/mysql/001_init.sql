-- outbox schema version 1 (MariaDB 10.6+, MySQL 8+).
CREATE TABLE outbox_messages (
    id              BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    message_id      VARCHAR(36) NOT NULL DEFAULT (UUID()),
    topic           VARCHAR(255) NOT NULL,
    business_key    VARCHAR(255) NULL,
    payload         LONGTEXT NOT NULL,
    headers         TEXT NOT NULL DEFAULT ('{}'),
    status          VARCHAR(16) NOT NULL DEFAULT 'pending',
    attempts        INT NOT NULL DEFAULT 0,
    max_attempts    INT NOT NULL DEFAULT 10,
    available_at    TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    created_at      TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    sent_at         TIMESTAMP(6) NULL DEFAULT NULL,
    consumed_at     TIMESTAMP(6) NULL DEFAULT NULL,
    last_error      TEXT NULL,
    unknown_outcome TINYINT NOT NULL DEFAULT 0,
    partition_no    SMALLINT AS (CRC32(COALESCE(business_key, message_id)) % 64) STORED,
    UNIQUE KEY outbox_messages_message_id_key (message_id),
    KEY outbox_messages_pending_idx (status, id),
    KEY outbox_messages_waiting_idx (business_key, status, available_at),
    KEY outbox_messages_status_topic_idx (status, topic)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE outbox_leases (
    partition_no    SMALLINT NOT NULL PRIMARY KEY,
    owner           VARCHAR(255) NULL,
    prev_owner      VARCHAR(255) NULL,
    expires_at      TIMESTAMP(6) NOT NULL DEFAULT '1970-01-01 00:00:01',
    inflight_max_id BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT INTO outbox_leases (partition_no) WITH RECURSIVE seq (n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM seq WHERE n < 63) SELECT n FROM seq;

CREATE TABLE outbox_relays (
    relay_id VARCHAR(255) NOT NULL PRIMARY KEY,
    seen_at  TIMESTAMP(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE outbox_inbox (
    consumer     VARCHAR(255) NOT NULL,
    message_id   VARCHAR(64) NOT NULL,
    processed_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (consumer, message_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
