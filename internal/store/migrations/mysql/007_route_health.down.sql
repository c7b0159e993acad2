-- Undoes version 7: the routes' health as the relays saw it.
DROP TABLE IF EXISTS outbox_route_health;
