-- Undoes version 20.
DELETE FROM outbox_relays WHERE source IS NOT NULL;
ALTER TABLE outbox_relays DROP COLUMN source;
