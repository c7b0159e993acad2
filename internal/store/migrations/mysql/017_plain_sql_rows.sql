-- outbox schema version 17 (MariaDB 10.6+, MySQL 8.0.16+): the table
-- refuses what PostgreSQL's refuses, the message ids it generates are
-- random (version 4), and a dead row's available_at is its time of death.
--
-- Checks: headers is a JSON object ({} when there are none), the topic has
-- 1 to 255 characters, attempts is 0 or more, max_attempts 1 or more, and
-- the status is one of pending, sent, consumed and dead. A producer that
-- writes the table with plain SQL gets an error naming the rule
-- (MariaDB: CONSTRAINT `outbox_messages_headers_object` failed) instead
-- of a row the relay cannot deliver.
--
-- Rows already there that break a rule are changed first, so that the
-- checks can be added (each UPDATE sets status last: MySQL assigns left to
-- right, and the others test the status the row had):
--   - headers NULL-like ('', blanks or the JSON null): {} (no headers, as
--     the relay read them);
--   - other headers that are not a JSON object (an array, a scalar, not
--     JSON): {}, and a pending row goes dead, its last_error naming the
--     headers it had (the relay would have made it dead for them);
--   - an empty topic: '(empty)', and a pending row goes dead;
--   - attempts below 0: 0; max_attempts below 1: 1 (one attempt, as the
--     relay gave such a row);
--   - a status in other letter cases ('PENDING'): in lower case; any
--     other status: dead, its last_error naming it.
-- A row made dead here has available_at = now, its time of death.
--
-- The default message id was UUID(), version 1: time and the server's
-- node id. It is now a random version 4 UUID, lower case, as the other
-- databases make them.
--
-- The settle writes available_at = NOW(6) when an outcome is dead (a
-- retry sets it to the next attempt's time, a send keeps it), so that for
-- a dead row available_at is when it died: `outbox dead list` shows it.
-- That change is in the relay's statement; nothing here.
UPDATE outbox_messages
SET last_error = CASE WHEN LOWER(status) IN ('pending', 'sent', 'consumed', 'dead') THEN last_error
                      ELSE CONCAT('unknown status: ', LEFT(status, 16)) END,
    available_at = CASE WHEN LOWER(status) IN ('pending', 'sent', 'consumed', 'dead') THEN available_at ELSE NOW(6) END,
    status = CASE WHEN LOWER(status) IN ('pending', 'sent', 'consumed', 'dead') THEN LOWER(status) ELSE 'dead' END
WHERE status NOT IN ('pending', 'sent', 'consumed', 'dead');
UPDATE outbox_messages
SET status = 'dead', available_at = NOW(6), last_error = CONCAT('headers are not a JSON object: ', LEFT(headers, 200))
WHERE status = 'pending' AND TRIM(headers) NOT IN ('', 'null')
  AND (CASE WHEN JSON_VALID(headers) THEN COALESCE(JSON_TYPE(headers) = 'OBJECT', 0) ELSE 0 END) = 0;
UPDATE outbox_messages SET headers = '{}'
WHERE (CASE WHEN JSON_VALID(headers) THEN COALESCE(JSON_TYPE(headers) = 'OBJECT', 0) ELSE 0 END) = 0;
UPDATE outbox_messages
SET last_error = CASE WHEN status = 'pending' THEN 'topic is empty' ELSE last_error END,
    available_at = CASE WHEN status = 'pending' THEN NOW(6) ELSE available_at END,
    topic = '(empty)',
    status = CASE WHEN status = 'pending' THEN 'dead' ELSE status END
WHERE topic = '';
UPDATE outbox_messages SET attempts = 0 WHERE attempts < 0;
UPDATE outbox_messages SET max_attempts = 1 WHERE max_attempts < 1;
ALTER TABLE outbox_messages
    ADD CONSTRAINT outbox_messages_headers_object
        CHECK ((CASE WHEN JSON_VALID(headers) THEN COALESCE(JSON_TYPE(headers) = 'OBJECT', 0) ELSE 0 END) = 1),
    ADD CONSTRAINT outbox_messages_topic_length CHECK (CHAR_LENGTH(topic) BETWEEN 1 AND 255),
    ADD CONSTRAINT outbox_messages_attempts_min CHECK (attempts >= 0),
    ADD CONSTRAINT outbox_messages_max_attempts_min CHECK (max_attempts >= 1),
    ADD CONSTRAINT outbox_messages_status_known CHECK (status IN ('pending', 'sent', 'consumed', 'dead')),
    ALTER COLUMN message_id SET DEFAULT (LOWER(CONCAT(HEX(RANDOM_BYTES(4)), '-', HEX(RANDOM_BYTES(2)), '-4', SUBSTR(HEX(RANDOM_BYTES(2)), 2), '-',
        HEX(ASCII(RANDOM_BYTES(1)) & 0x3F | 0x80), HEX(RANDOM_BYTES(1)), '-', HEX(RANDOM_BYTES(6)))));
