-- outbox schema version 1 (SQLite 3.35+). Times are UTC text
-- 'YYYY-MM-DD HH:MM:SS.SSS', which sorts in time order. One relay owns the
-- single partition: SQLite has one writer.
CREATE TABLE outbox_messages (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id      TEXT NOT NULL DEFAULT (lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)))),
    topic           TEXT NOT NULL CHECK (length(topic) BETWEEN 1 AND 255),
    business_key    TEXT CHECK (business_key IS NULL OR length(business_key) <= 255),
    payload         TEXT NOT NULL,
    headers         TEXT NOT NULL DEFAULT '{}',
    status          TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'consumed', 'dead')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    max_attempts    INTEGER NOT NULL DEFAULT 10,
    available_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    created_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    sent_at         TEXT,
    consumed_at     TEXT,
    last_error      TEXT,
    unknown_outcome INTEGER NOT NULL DEFAULT 0,
    partition_no    INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX outbox_messages_message_id_key ON outbox_messages (message_id);
CREATE INDEX outbox_messages_pending_idx ON outbox_messages (id) WHERE status = 'pending';
CREATE INDEX outbox_messages_waiting_idx ON outbox_messages (business_key, id)
    WHERE status = 'pending' AND available_at > created_at AND business_key IS NOT NULL;
CREATE INDEX outbox_messages_status_topic_idx ON outbox_messages (status, topic);

CREATE TABLE outbox_leases (
    partition_no    INTEGER PRIMARY KEY,
    owner           TEXT,
    prev_owner      TEXT,
    expires_at      TEXT NOT NULL DEFAULT '0000-00-00 00:00:00.000',
    inflight_max_id INTEGER NOT NULL DEFAULT 0
);
INSERT INTO outbox_leases (partition_no) VALUES (0);

CREATE TABLE outbox_relays (
    relay_id TEXT PRIMARY KEY,
    seen_at  TEXT NOT NULL
);

CREATE TABLE outbox_inbox (
    consumer     TEXT NOT NULL,
    message_id   TEXT NOT NULL,
    processed_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    PRIMARY KEY (consumer, message_id)
);
