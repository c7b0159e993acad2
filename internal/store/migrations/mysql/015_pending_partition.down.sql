-- Undoes version 15: the pending-rows index as version 1 made it.
ALTER TABLE outbox_messages
    DROP INDEX outbox_messages_pending_idx,
    ADD INDEX outbox_messages_pending_idx (status, id);
