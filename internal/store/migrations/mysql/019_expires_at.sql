-- outbox schema version 19 (MariaDB 10.6+, MySQL 8.0.19+): a message may
-- expire.
--
-- expires_at (NULL: never) is the database time after which a message not
-- yet confirmed is no longer delivered; a plain-SQL producer may set it.
-- Such a message moves to the status 'expired' (last_error says when),
-- stops holding back its key, and can be requeued like a dead letter. The
-- relay's read leaves such rows out, and the relay moves those of its
-- partitions to 'expired' through outbox_messages_expiring_idx.
ALTER TABLE outbox_messages
    ADD COLUMN expires_at TIMESTAMP(6) NULL DEFAULT NULL,
    ADD KEY outbox_messages_expiring_idx (status, expires_at);
ALTER TABLE outbox_messages DROP CONSTRAINT outbox_messages_status_known;
ALTER TABLE outbox_messages
    ADD CONSTRAINT outbox_messages_status_known CHECK (status IN ('pending', 'sent', 'consumed', 'dead', 'expired'));
