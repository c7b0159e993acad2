-- outbox schema version 3 (PostgreSQL 12+): the archive that retention
-- moves settled messages into when archiving is on. Same columns as
-- outbox_messages (without the relay's partition_no), plus archived_at.
-- Retention itself needs no index on outbox_messages: it walks the primary
-- key from its low end, so the relay's hot path pays nothing for it.
CREATE TABLE outbox_messages_archive (
    id              BIGINT PRIMARY KEY,
    message_id      UUID NOT NULL,
    topic           VARCHAR(255) NOT NULL,
    business_key    VARCHAR(255),
    payload         TEXT NOT NULL,
    headers         JSONB NOT NULL DEFAULT '{}',
    status          TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    max_attempts    INTEGER NOT NULL DEFAULT 10,
    available_at    TIMESTAMPTZ NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    sent_at         TIMESTAMPTZ,
    consumed_at     TIMESTAMPTZ,
    last_error      TEXT,
    unknown_outcome BOOLEAN NOT NULL DEFAULT false,
    archived_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
-- Not unique: a message id may be enqueued again once its first row has
-- left outbox_messages, and both rows belong in the archive.
CREATE INDEX outbox_messages_archive_message_id_idx ON outbox_messages_archive (message_id);
CREATE INDEX outbox_messages_archive_archived_at_idx ON outbox_messages_archive (archived_at);
