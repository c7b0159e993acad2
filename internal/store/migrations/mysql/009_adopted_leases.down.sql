-- Undoes version 9: the leases of adopted tables.
DROP TABLE IF EXISTS outbox_adopted_leases;
