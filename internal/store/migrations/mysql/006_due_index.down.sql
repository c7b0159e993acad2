-- Undoes version 6: the index of the due-age sample.
DROP INDEX outbox_messages_due_idx ON outbox_messages;
