-- Undoes version 18.
ALTER TABLE outbox_relays DROP COLUMN wake;
