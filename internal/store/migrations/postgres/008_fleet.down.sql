-- Undoes version 8: the fleets' membership.
DROP TABLE IF EXISTS outbox_fleet_members;
