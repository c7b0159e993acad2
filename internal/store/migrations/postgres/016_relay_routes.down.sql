-- Undoes version 16.
ALTER TABLE outbox_relays DROP COLUMN routes;
