package driver

import (
	"errors"
	"strconv"
)

// Dialect names the SQL dialect the outbox speaks to a database. It
// decides the statements the outbox sends, their placeholders ($1 on
// PostgreSQL, ? elsewhere) and the schema Migrate creates.
type Dialect string

// The supported dialects.
const (
	// Postgres is PostgreSQL 12 or later.
	Postgres Dialect = "postgres"
	// MySQL is MariaDB 10.6 or later, or MySQL 8.
	MySQL Dialect = "mysql"
	// SQLite is SQLite 3.35 or later.
	SQLite Dialect = "sqlite"
)

// ParseDialect returns the dialect named s: "postgres", "mysql" or
// "sqlite", or one of the aliases "postgresql", "pgx", "mariadb" and
// "sqlite3".
func ParseDialect(s string) (Dialect, error) {
	switch Dialect(s) {
	case Postgres, MySQL, SQLite:
		return Dialect(s), nil
	case "postgresql", "pgx":
		return Postgres, nil
	case "mariadb":
		return MySQL, nil
	case "sqlite3":
		return SQLite, nil
	}
	return "", errors.New("unknown dialect " + strconv.Quote(s) + " (want postgres, mysql or sqlite)")
}
