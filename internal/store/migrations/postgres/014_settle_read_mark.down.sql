-- Undoes version 14: the relay settles and reads in two calls again.
DROP FUNCTION IF EXISTS outbox_settle_read_mark(bigint[], text[], bigint[], text[], int[], boolean[], text, int[], int);
