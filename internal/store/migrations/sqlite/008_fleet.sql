-- outbox schema version 8 (SQLite): the members of relay fleets that share
-- a list of databases, in the fleet's coordination database.
CREATE TABLE outbox_fleet_members (
    fleet     TEXT NOT NULL,
    member_id TEXT NOT NULL,
    seen_at   TEXT NOT NULL,
    PRIMARY KEY (fleet, member_id)
);
