-- outbox schema version 3 (MariaDB 10.6+, MySQL 8+): the archive that
-- retention moves settled messages into when archiving is on. Same columns
-- as outbox_messages (without the relay's partition_no), plus archived_at.
-- Retention itself needs no index on outbox_messages: it walks the primary
-- key from its low end, so the relay's hot path pays nothing for it.
CREATE TABLE outbox_messages_archive (
    id              BIGINT NOT NULL PRIMARY KEY,
    message_id      VARCHAR(36) NOT NULL,
    topic           VARCHAR(255) NOT NULL,
    business_key    VARCHAR(255) NULL,
    payload         LONGTEXT NOT NULL,
    headers         TEXT NOT NULL,
    status          VARCHAR(16) NOT NULL,
    attempts        INT NOT NULL DEFAULT 0,
    max_attempts    INT NOT NULL DEFAULT 10,
    available_at    TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    created_at      TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    sent_at         TIMESTAMP(6) NULL DEFAULT NULL,
    consumed_at     TIMESTAMP(6) NULL DEFAULT NULL,
    last_error      TEXT NULL,
    unknown_outcome TINYINT NOT NULL DEFAULT 0,
    archived_at     TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    -- Not unique: a message id may be enqueued again once its first row
    -- has left outbox_messages, and both rows belong in the archive.
    KEY outbox_messages_archive_message_id_idx (message_id),
    KEY outbox_messages_archive_archived_at_idx (archived_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
