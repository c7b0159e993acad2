-- Undoes version 19: expired messages become dead letters (their
-- last_error says they expired) and expires_at goes.
UPDATE outbox_messages SET status = 'dead' WHERE status = 'expired';
ALTER TABLE outbox_messages DROP CONSTRAINT outbox_messages_status_known;
ALTER TABLE outbox_messages
    ADD CONSTRAINT outbox_messages_status_known CHECK (status IN ('pending', 'sent', 'consumed', 'dead'));
ALTER TABLE outbox_messages DROP KEY outbox_messages_expiring_idx, DROP COLUMN expires_at;
