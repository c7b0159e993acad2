-- Undoes version 4: the relay's read function.
DROP FUNCTION IF EXISTS outbox_read(int[], int);
