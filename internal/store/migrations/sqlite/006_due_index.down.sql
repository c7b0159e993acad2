-- Undoes version 6: the index of the due-age sample.
DROP INDEX IF EXISTS outbox_messages_due_idx;
