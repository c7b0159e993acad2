-- outbox schema version 7 (MariaDB 10.6+, MySQL 8+): route health as each
-- relay last saw it, written when a route goes down or comes up again, for
-- `outbox status` and the admin page. A relay removes its rows when it
-- stops.
CREATE TABLE outbox_route_health (
    relay_id VARCHAR(255) NOT NULL,
    route    VARCHAR(255) NOT NULL,
    state    VARCHAR(8) NOT NULL,
    since    TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    reason   TEXT NOT NULL,
    PRIMARY KEY (relay_id, route)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
