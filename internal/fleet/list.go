// Package fleet serves many databases from a few relay processes: the
// list of databases (flags or a file that may change), the membership of
// the processes that share it, and which member serves which database.
//
// Members share a coordination database: each refreshes its row in
// outbox_fleet_members every Heartbeat, and a member whose row is older
// than TTL is gone. Every member computes the same assignment from the
// live members by rendezvous hashing, so a member joining or leaving moves
// only the databases that change hands. A member opens connections only
// to the databases it serves (and the coordination database). While the
// split changes, two members may briefly both think they serve a database;
// the database's own partition leases fence them, so only one of them
// publishes at a time.
package fleet

import (
	"bufio"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strings"

	"github.com/txoutbox/outbox/internal/redact"
)

// Database is one database of the list.
type Database struct {
	// Name labels the database in metrics, logs and status: the NAME of
	// its line, or its URL without credentials.
	Name string
	// URL is how to reach it; it may hold credentials.
	URL string
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)

// ParseList reads a database list: one database a line, `URL` or
// `NAME URL`; blank lines and lines starting with # are skipped, as is
// whatever follows " #" on a line. Names must be unique; errors name the
// line and never show credentials.
func ParseList(r io.Reader) ([]Database, error) {
	var dbs []Database
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		var db Database
		switch len(fields) {
		case 1:
			db = Database{Name: DefaultName(fields[0]), URL: fields[0]}
		case 2:
			if !nameRE.MatchString(fields[0]) {
				return nil, fmt.Errorf("line %d: name %q: want letters, digits, '_', '.', ':' or '-' (at most 128)", n, fields[0])
			}
			db = Database{Name: fields[0], URL: fields[1]}
		default:
			return nil, fmt.Errorf("line %d: want URL or NAME URL, got %d fields", n, len(fields))
		}
		if !strings.Contains(db.URL, "://") {
			return nil, fmt.Errorf("line %d: %s is not a database URL (postgres://…, mysql://…, sqlite://…)", n, redact.URL(db.URL))
		}
		dbs = append(dbs, db)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return dbs, checkUnique(dbs)
}

// FromURLs is the list given as --db flags, each named by DefaultName.
func FromURLs(urls []string) ([]Database, error) {
	dbs := make([]Database, len(urls))
	for i, u := range urls {
		dbs[i] = Database{Name: DefaultName(u), URL: u}
	}
	return dbs, checkUnique(dbs)
}

func checkUnique(dbs []Database) error {
	seen := map[string]bool{}
	for _, db := range dbs {
		if seen[db.Name] {
			return fmt.Errorf("database %q is listed twice", db.Name)
		}
		seen[db.Name] = true
	}
	return nil
}

// DefaultName names a database by its URL without credentials or query
// (scheme://host/path), keeping a search_path, which picks one schema's
// outbox of a PostgreSQL database: scheme://host/path?search_path=s.
func DefaultName(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return redact.URL(raw)
	}
	sp := u.Query().Get("search_path")
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	if sp != "" {
		u.RawQuery = url.Values{"search_path": {sp}}.Encode()
	}
	return u.String()
}
