-- outbox schema version 8 (MySQL/MariaDB): the members of relay fleets
-- that share a list of databases, in the fleet's coordination database.
CREATE TABLE outbox_fleet_members (
    fleet     VARCHAR(255) NOT NULL,
    member_id VARCHAR(255) NOT NULL,
    seen_at   TIMESTAMP(6) NOT NULL,
    PRIMARY KEY (fleet, member_id)
) ENGINE=InnoDB;
