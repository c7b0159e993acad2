-- Undoes version 2: the operators' audit trail.
DROP TABLE IF EXISTS outbox_audit;
