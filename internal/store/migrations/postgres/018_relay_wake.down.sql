-- Undoes version 18.
ALTER TABLE outbox_relays DROP COLUMN wake;
DROP TRIGGER outbox_messages_wake ON outbox_messages;
DROP FUNCTION outbox_notify_wake();
DROP TABLE outbox_wake_wanted;
