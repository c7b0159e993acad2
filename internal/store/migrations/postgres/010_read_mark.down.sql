-- Undoes version 10: the relay reads and marks in two statements again.
DROP FUNCTION IF EXISTS outbox_read_mark(int[], int, text);
