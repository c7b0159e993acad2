-- outbox schema version 17 (SQLite 3.38+): the table refuses what
-- PostgreSQL's refuses, and a dead row's available_at is its time of
-- death.
--
-- SQLite adds no CHECK to a table that exists, so two triggers refuse,
-- with RAISE(ABORT) and a message naming the rule, an insert or update
-- whose headers are not a JSON object ({} when there are none), whose
-- attempts is not an integer of 0 or more, whose max_attempts is not an
-- integer of 1 or more, whose partition_no is not 0 (the one partition:
-- leave it out), or whose available_at or created_at is not a time
-- julianday() reads. Version 1's CHECKs already hold the topic to 1–255
-- characters, the key to 255 and the status to the four. The update
-- trigger tests headers and times only when they change, so the relay's
-- settle pays for a few integer comparisons.
--
-- Rows already there that break a rule are changed first:
--   - headers NULL-like ('', blanks or the JSON null): {} (no headers, as
--     the relay read them);
--   - other headers that are not a JSON object (an array, a scalar, not
--     JSON): {}, and a pending row goes dead, its last_error naming the
--     headers it had (the relay would have made it dead for them);
--   - attempts that is not an integer of 0 or more: the integer it reads
--     as, at least 0; max_attempts likewise, at least 1 (one attempt, as
--     the relay gave such a row);
--   - partition_no other than 0: 0;
--   - an available_at that is not a time: now (the relay reads it as due);
--     a created_at that is not a time: its available_at.
-- A row made dead here has available_at = now, its time of death.
--
-- The settle writes available_at = now when an outcome is dead (a retry
-- sets it to the next attempt's time, a send keeps it), so that for a dead
-- row available_at is when it died: `outbox dead list` shows it. That
-- change is in the relay's statement; nothing here.
UPDATE outbox_messages
SET status = 'dead', available_at = strftime('%Y-%m-%d %H:%M:%f', 'now'),
    last_error = 'headers are not a JSON object: ' || substr(headers, 1, 200)
WHERE status = 'pending' AND trim(headers) NOT IN ('', 'null')
  AND CASE WHEN json_valid(headers) THEN json_type(headers) <> 'object' ELSE 1 END;
UPDATE outbox_messages SET headers = '{}'
WHERE CASE WHEN json_valid(headers) THEN json_type(headers) <> 'object' ELSE 1 END;
UPDATE outbox_messages SET attempts = max(CAST(attempts AS INTEGER), 0)
WHERE typeof(attempts) <> 'integer' OR attempts < 0;
UPDATE outbox_messages SET max_attempts = max(CAST(max_attempts AS INTEGER), 1)
WHERE typeof(max_attempts) <> 'integer' OR max_attempts < 1;
UPDATE outbox_messages SET partition_no = 0 WHERE partition_no IS NOT 0;
UPDATE outbox_messages SET available_at = strftime('%Y-%m-%d %H:%M:%f', 'now') WHERE julianday(available_at) IS NULL;
UPDATE outbox_messages SET created_at = available_at WHERE julianday(created_at) IS NULL;
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
