-- Undoes version 17: the table refuses only what version 1's CHECKs do.
-- Rows the migration changed stay as it left them.
DROP TRIGGER IF EXISTS outbox_messages_update_check;
DROP TRIGGER IF EXISTS outbox_messages_insert_check;
