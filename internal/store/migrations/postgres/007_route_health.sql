-- outbox schema version 7 (PostgreSQL): route health as each relay last
-- saw it, written when a route goes down or comes up again, for `outbox
-- status` and the admin page. A relay removes its rows when it stops.
CREATE TABLE outbox_route_health (
    relay_id TEXT NOT NULL,
    route    TEXT NOT NULL,
    state    VARCHAR(8) NOT NULL,
    since    TIMESTAMPTZ NOT NULL DEFAULT now(),
    reason   TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (relay_id, route)
);
