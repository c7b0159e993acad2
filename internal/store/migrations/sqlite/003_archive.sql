-- outbox schema version 3 (SQLite 3.35+): the archive that retention moves
-- settled messages into when archiving is on. Same columns as
-- outbox_messages (without the relay's partition_no), plus archived_at.
-- Retention itself needs no index on outbox_messages: it walks the primary
-- key from its low end, so the relay's hot path pays nothing for it.
CREATE TABLE outbox_messages_archive (
    id              INTEGER PRIMARY KEY,
    message_id      TEXT NOT NULL,
    topic           TEXT NOT NULL,
    business_key    TEXT,
    payload         TEXT NOT NULL,
    headers         TEXT NOT NULL DEFAULT '{}',
    status          TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    max_attempts    INTEGER NOT NULL DEFAULT 10,
    available_at    TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    sent_at         TEXT,
    consumed_at     TEXT,
    last_error      TEXT,
    unknown_outcome INTEGER NOT NULL DEFAULT 0,
    archived_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now'))
);
-- Not unique: a message id may be enqueued again once its first row has
-- left outbox_messages, and both rows belong in the archive.
CREATE INDEX outbox_messages_archive_message_id_idx ON outbox_messages_archive (message_id);
CREATE INDEX outbox_messages_archive_archived_at_idx ON outbox_messages_archive (archived_at);
