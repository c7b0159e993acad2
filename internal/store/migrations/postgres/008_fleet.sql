-- outbox schema version 8 (PostgreSQL): the members of relay fleets that
-- share a list of databases, in the fleet's coordination database. Each
-- member refreshes its row; the live rows decide which member serves
-- which database.
CREATE TABLE outbox_fleet_members (
    fleet     VARCHAR(255) NOT NULL,
    member_id VARCHAR(255) NOT NULL,
    seen_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (fleet, member_id)
);
