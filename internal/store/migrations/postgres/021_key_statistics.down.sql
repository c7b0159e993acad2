-- Undoes version 21.
ALTER TABLE outbox_messages ALTER COLUMN business_key RESET (n_distinct);
