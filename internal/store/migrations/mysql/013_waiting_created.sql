-- outbox schema version 13 (MariaDB 10.6+, MySQL 8+): the waiting-rows
-- index also holds each row's created_at, so the relay's read tells
-- whether a key's row holds the later ones back ("not due yet, and
-- delayed since it was written") from the index alone. The read walks a
-- key's not-yet-due rows backwards from the latest; without created_at
-- in the index, each step of that walk also read the row itself.
ALTER TABLE outbox_messages
    DROP INDEX outbox_messages_waiting_idx,
    ADD INDEX outbox_messages_waiting_idx (business_key, status, available_at, created_at);
