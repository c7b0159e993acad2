-- Undoes version 13: the waiting-rows index as version 1 made it.
ALTER TABLE outbox_messages
    DROP INDEX outbox_messages_waiting_idx,
    ADD INDEX outbox_messages_waiting_idx (business_key, status, available_at);
