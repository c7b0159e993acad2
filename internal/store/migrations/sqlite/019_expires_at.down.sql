-- Undoes version 19: the table of version 18 again, expired messages
-- as dead letters (their last_error says they expired), expires_at gone.
CREATE TABLE outbox_messages_rebuild (
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
INSERT INTO outbox_messages_rebuild (id, message_id, topic, business_key, payload, headers, status, attempts, max_attempts,
    available_at, created_at, sent_at, consumed_at, last_error, unknown_outcome, partition_no)
SELECT id, message_id, topic, business_key, payload, headers, CASE WHEN status = 'expired' THEN 'dead' ELSE status END, attempts, max_attempts,
    available_at, created_at, sent_at, consumed_at, last_error, unknown_outcome, partition_no FROM outbox_messages;
-- AUTOINCREMENT's high-water mark moves with the rows: the id of a row
-- deleted before (retention) is never given again.
UPDATE sqlite_sequence SET seq = (SELECT seq FROM sqlite_sequence WHERE name = 'outbox_messages')
WHERE name = 'outbox_messages_rebuild';
INSERT INTO sqlite_sequence (name, seq) SELECT 'outbox_messages_rebuild', seq FROM sqlite_sequence
WHERE name = 'outbox_messages' AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'outbox_messages_rebuild');
DROP TABLE outbox_messages;
ALTER TABLE outbox_messages_rebuild RENAME TO outbox_messages;
CREATE UNIQUE INDEX outbox_messages_message_id_key ON outbox_messages (message_id);
CREATE INDEX outbox_messages_pending_idx ON outbox_messages (id) WHERE status = 'pending';
CREATE INDEX outbox_messages_waiting_idx ON outbox_messages (business_key, id)
    WHERE status = 'pending' AND available_at > created_at AND business_key IS NOT NULL;
CREATE INDEX outbox_messages_status_topic_idx ON outbox_messages (status, topic);
CREATE INDEX outbox_messages_due_idx ON outbox_messages (available_at) WHERE status = 'pending';
-- Each statement of a trigger body begins its line with the ';' that ends
-- the one before: migration files are split at lines that end in ';'.
CREATE TRIGGER outbox_messages_insert_check BEFORE INSERT ON outbox_messages
BEGIN
    SELECT RAISE(ABORT, 'outbox_messages.headers must be a JSON object, {} for none')
        WHERE iif(json_valid(NEW.headers), json_type(NEW.headers), '') <> 'object'
    ; SELECT RAISE(ABORT, 'outbox_messages.attempts must be an integer of 0 or more')
        WHERE typeof(NEW.attempts) <> 'integer' OR NEW.attempts < 0
    ; SELECT RAISE(ABORT, 'outbox_messages.max_attempts must be an integer of 1 or more')
        WHERE typeof(NEW.max_attempts) <> 'integer' OR NEW.max_attempts < 1
    ; SELECT RAISE(ABORT, 'outbox_messages.partition_no must be 0 on SQLite: leave it out')
        WHERE NEW.partition_no IS NOT 0
    ; SELECT RAISE(ABORT, 'outbox_messages.available_at must be a time, such as 2025-01-31 12:00:00.000 (UTC)')
        WHERE julianday(NEW.available_at) IS NULL
    ; SELECT RAISE(ABORT, 'outbox_messages.created_at must be a time, such as 2025-01-31 12:00:00.000 (UTC)')
        WHERE julianday(NEW.created_at) IS NULL
    ; END;
CREATE TRIGGER outbox_messages_update_check
BEFORE UPDATE OF headers, attempts, max_attempts, partition_no, available_at, created_at ON outbox_messages
WHEN typeof(NEW.attempts) <> 'integer' OR NEW.attempts < 0 OR typeof(NEW.max_attempts) <> 'integer' OR NEW.max_attempts < 1
  OR NEW.partition_no IS NOT 0 OR NEW.headers IS NOT OLD.headers
  OR NEW.available_at IS NOT OLD.available_at OR NEW.created_at IS NOT OLD.created_at
BEGIN
    SELECT RAISE(ABORT, 'outbox_messages.headers must be a JSON object, {} for none')
        WHERE NEW.headers IS NOT OLD.headers AND iif(json_valid(NEW.headers), json_type(NEW.headers), '') <> 'object'
    ; SELECT RAISE(ABORT, 'outbox_messages.attempts must be an integer of 0 or more')
        WHERE typeof(NEW.attempts) <> 'integer' OR NEW.attempts < 0
    ; SELECT RAISE(ABORT, 'outbox_messages.max_attempts must be an integer of 1 or more')
        WHERE typeof(NEW.max_attempts) <> 'integer' OR NEW.max_attempts < 1
    ; SELECT RAISE(ABORT, 'outbox_messages.partition_no must be 0 on SQLite: leave it out')
        WHERE NEW.partition_no IS NOT 0
    ; SELECT RAISE(ABORT, 'outbox_messages.available_at must be a time, such as 2025-01-31 12:00:00.000 (UTC)')
        WHERE NEW.available_at IS NOT OLD.available_at AND julianday(NEW.available_at) IS NULL
    ; SELECT RAISE(ABORT, 'outbox_messages.created_at must be a time, such as 2025-01-31 12:00:00.000 (UTC)')
        WHERE NEW.created_at IS NOT OLD.created_at AND julianday(NEW.created_at) IS NULL
    ; END;
