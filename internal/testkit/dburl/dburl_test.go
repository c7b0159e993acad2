package dburl_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/txoutbox/outbox/internal/dburl"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/internal/testkit/testpgbouncer"
	"github.com/txoutbox/outbox/internal/testkit/testserver"
)

func TestParse(t *testing.T) {
	cases := []struct {
		url     string
		dialect store.Dialect
		dsn     string // substring of the driver DSN
	}{
		{"postgres://app@db:5432/app", store.Postgres, "postgres://app@db:5432/app"},
		{"postgresql://app:pw@db/app?sslmode=disable", store.Postgres, "sslmode=disable"},
		{"mysql://u:p@db:3307/shop", store.MySQL, "u:p@tcp(db:3307)/shop"},
		{"mariadb://u@db/shop", store.MySQL, "tcp(db:3306)/shop"},
		{"mysql://u@db/shop?tls=true", store.MySQL, "tls=true"},
		{"sqlite:///var/lib/app.db", store.SQLite, "file:/var/lib/app.db?"},
		{"sqlite://relative.db", store.SQLite, "file:relative.db?"},
	}
	for _, c := range cases {
		d, dsn, err := dburl.Parse(c.url)
		if err != nil {
			t.Errorf("%s: %v", c.url, err)
			continue
		}
		if d != c.dialect || !strings.Contains(dsn, c.dsn) {
			t.Errorf("%s: got %s %q, want %s containing %q", c.url, d, dsn, c.dialect, c.dsn)
		}
	}
	if _, dsn, _ := dburl.Parse("mysql://u@db/shop"); !strings.Contains(dsn, "parseTime=true") {
		t.Errorf("MySQL DSN %q lacks parseTime=true", dsn)
	}
}

func TestParseRejects(t *testing.T) {
	for _, raw := range []string{"", "db:5432", "oracle://x/y", "mysql://u:secret@db", "sqlite://", "sqlite:///", "postgres://u:secret@db:notaport/x",
		"app:secret@db/app", "host=db user=app password=secret", "host=db password='sec ret'", "root:secret@tcp(db:3306)/x",
		"mysql://u:secret@db/x?password=secret", "mysql://u:secret@db/x?tls=skip-verify"} {
		_, _, err := dburl.Parse(raw)
		if !errors.Is(err, dburl.ErrBadURL) {
			t.Errorf("%q: got %v, want ErrBadURL", raw, err)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: error leaks the password: %v", raw, err)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error is not one line", raw)
		}
	}
}

// TestMySQLParamsAllowList: a mysql:// URL takes the parameters of
// MySQLParams only; any other is refused naming it, since the driver
// would run it as SET or act on it (allowAllFiles: LOAD DATA LOCAL).
func TestMySQLParamsAllowList(t *testing.T) {
	for raw, name := range map[string]string{
		"mysql://u@db/x?password=x":                                `"password"`,
		"mysql://u@db/x?allowAllFiles=true":                        `"allowAllFiles"`,
		"mysql://u@db/x?tls=true&sql_mode=ANSI":                    `"sql_mode"`,
		"mysql://u@db/x?interpolateParams=yes":                     `interpolateParams="yes"`,
		"mysql://u@db/x?tx_isolation=snapshot":                     `tx_isolation="snapshot"`,
		"mysql://u@db/x?transaction_isolation=x%27,sql_mode%3D%27": `transaction_isolation="x',sql_mode='"`,
		"mysql://u@db/x?timeout=5s&timeout=6s":                     `"timeout" is given 2 times`,
		"mysql://u@db/x?rejectReadOnly=maybe":                      `rejectReadOnly="maybe"`,
		"mysql://u@db/x?allowCleartextPasswords=1":                 `"allowCleartextPasswords"`,
		"mysql://u@db/x?multiStatements=true&tls=no":               `"multiStatements"`,
	} {
		_, _, err := dburl.Parse(raw)
		if !errors.Is(err, dburl.ErrBadURL) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got %v, want ErrBadURL naming %s", raw, err, name)
		}
	}
	_, dsn, err := dburl.Parse("mysql://u@db/x?tls=true&timeout=5s&charset=utf8mb4&loc=UTC")
	if err != nil || !strings.Contains(dsn, "tls=true") || !strings.Contains(dsn, "timeout=5s") || !strings.Contains(dsn, "charset=utf8mb4") {
		t.Errorf("allowed parameters: %q, %v", dsn, err)
	}
}

// TestMySQLDefaults: a mysql:// URL's DSN sends arguments with the
// statement (interpolateParams) and sets READ COMMITTED on every new
// connection, unless the URL chooses otherwise; an isolation level in the
// URL is sent quoted, whatever its case.
func TestMySQLDefaults(t *testing.T) {
	cases := []struct {
		url       string
		want, not []string
	}{
		{"mysql://u@db/x", []string{"interpolateParams=true", "transaction_isolation=%27READ-COMMITTED%27"}, []string{"tx_isolation"}},
		{"mysql://u@db/x?interpolateParams=false", []string{"interpolateParams=false", "transaction_isolation=%27READ-COMMITTED%27"}, []string{"interpolateParams=true"}},
		{"mysql://u@db/x?tx_isolation=repeatable-read", []string{"tx_isolation=%27REPEATABLE-READ%27", "interpolateParams=true"}, []string{"transaction_isolation"}},
		{"mysql://u@db/x?transaction_isolation=%27SERIALIZABLE%27", []string{"transaction_isolation=%27SERIALIZABLE%27"}, []string{"READ-COMMITTED", "tx_isolation"}},
		{"mysql://u@db/x?charset=gbk", []string{"charset=gbk", "READ-COMMITTED"}, []string{"interpolateParams"}},
	}
	for _, c := range cases {
		_, dsn, err := dburl.Parse(c.url)
		if err != nil {
			t.Errorf("%s: %v", c.url, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(dsn, w) {
				t.Errorf("%s: DSN %q lacks %q", c.url, dsn, w)
			}
		}
		for _, n := range c.not {
			if strings.Contains(dsn, n) {
				t.Errorf("%s: DSN %q holds %q", c.url, dsn, n)
			}
		}
	}
}

// TestOpenMySQLReadCommitted: connections opened from a mysql:// URL run
// at READ COMMITTED, whichever name the server gives the variable (MariaDB
// before 11.1 knows only tx_isolation), every connection of the pool, not
// only the first; an isolation level the URL sets is kept.
func TestOpenMySQLReadCommitted(t *testing.T) {
	ctx := context.Background()
	raw := testdb.MySQLURL
	sep := map[bool]string{true: "&", false: "?"}[strings.Contains(raw, "?")]
	probe, err := dburl.Open(ctx, raw)
	if err != nil {
		testdb.Unavailable(t, "MariaDB/MySQL at "+dburl.Redact(raw), err)
	}
	variable := "transaction_isolation"
	if err := probe.SQL.QueryRowContext(ctx, "SELECT @@transaction_isolation").Scan(new(string)); err != nil {
		variable = "tx_isolation" // the server knows the old name only
	}
	probe.Close()
	for _, c := range []struct{ url, want string }{
		{raw, "READ-COMMITTED"},
		{raw + sep + variable + "=serializable", "SERIALIZABLE"},
		{raw + sep + variable + "=%27REPEATABLE-READ%27", "REPEATABLE-READ"},
	} {
		db, err := dburl.Open(ctx, c.url)
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		// Three connections held at once: each was opened with the
		// setting.
		conns := make([]*sql.Conn, 3)
		for i := range conns {
			if conns[i], err = db.SQL.Conn(ctx); err != nil {
				t.Fatal(err)
			}
			var level string
			if err := conns[i].QueryRowContext(ctx, "SELECT @@"+variable).Scan(&level); err != nil || level != c.want {
				t.Errorf("%s: connection %d: %s = %q, %v; want %q", c.url, i, variable, level, err, c.want)
			}
		}
		for _, conn := range conns {
			_ = conn.Close()
		}
		db.Close()
	}
}

func TestRedact(t *testing.T) {
	for raw, want := range map[string]string{
		"postgres://app:s3cret@db:5432/app": "postgres://app:xxxxx@db:5432/app",
		"postgres://app:123/x@db:5432/app":  "postgres://app:xxxxx@db:5432/app",
		"mysql://root@127.0.0.1:3306/test":  "mysql://xxxxx@127.0.0.1:3306/test", // a lone user may be a token
		"sqlite:///tmp/x.db":                "sqlite:///tmp/x.db",
	} {
		if got := dburl.Redact(raw); got != want {
			t.Errorf("Redact(%q) = %q, want %q", raw, got, want)
		}
	}
}

func FuzzRedactHidesPassword(f *testing.F) {
	f.Add("postgres://u:pw@h/db", "pw")
	f.Add("mysql://u:p%40ss@h:3306/db", "p@ss")
	f.Fuzz(func(t *testing.T, raw, pw string) {
		if len(pw) < 4 || strings.ContainsAny(pw, "/@:?#%[] ") {
			return
		}
		u := "postgres://user:" + pw + "@host:5432/db?" + raw
		if got := dburl.Redact(u); strings.Contains(got, pw) && !strings.Contains("postgres://user:xxxxx@host:5432/db?"+raw, pw) {
			t.Fatalf("Redact(%q) = %q still holds the password", u, got)
		}
		if _, _, err := dburl.Parse(u); err != nil && strings.Contains(err.Error(), pw) && !strings.Contains(raw, pw) {
			t.Fatalf("Parse error leaks the password: %v", err)
		}
	})
}

// TestOpenTurnsJITOff: PostgreSQL connections opened from a URL have JIT
// off unless the URL asks for it.
func TestOpenTurnsJITOff(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ query, want string }{{"", "off"}, {"jit=on", "on"}} {
		raw := testdb.PostgresURL
		if c.query != "" {
			raw += map[bool]string{true: "&", false: "?"}[strings.Contains(raw, "?")] + c.query
		}
		db, err := dburl.Open(ctx, raw)
		if err != nil {
			testdb.Unavailable(t, "PostgreSQL", err)
		}
		var jit string
		err = db.Pool.QueryRow(ctx, "SHOW jit").Scan(&jit)
		db.Close()
		if err != nil || jit != c.want {
			t.Errorf("%q: jit = %q, %v; want %q", raw, jit, err, c.want)
		}
	}
}

// TestOpenThroughPgBouncer: PgBouncer (transaction mode, Debian's default
// configuration otherwise) refuses the jit startup parameter; Open
// connects again without it, marks the database as behind a pooler and
// runs statements unnamed, unless the URL chooses a query mode itself.
// Straight to the server, jit stays off and statements are cached.
func TestOpenThroughPgBouncer(t *testing.T) {
	name := testdb.PostgresDatabase(t)
	b := testpgbouncer.Start(t, "127.0.0.1:5432")
	ctx := context.Background()
	cases := []struct {
		url    string
		pooler bool
		mode   pgx.QueryExecMode
		jit    string
	}{
		{testdb.WithDatabase(testdb.PostgresURL, name), false, pgx.QueryExecModeCacheStatement, "off"},
		{b.URL(name), true, pgx.QueryExecModeCacheDescribe, "on"},
		{b.URL(name) + "&default_query_exec_mode=simple_protocol", true, pgx.QueryExecModeSimpleProtocol, "on"},
	}
	for _, c := range cases {
		db, err := dburl.Open(ctx, c.url)
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		var jit string
		for i := range 3 { // several transactions, on whichever server connection
			if err := db.Pool.QueryRow(ctx, "SELECT current_setting('jit') WHERE $1::int >= 0", i).Scan(&jit); err != nil {
				t.Fatalf("%s: query %d: %v", c.url, i, err)
			}
		}
		mode := db.Pool.Config().ConnConfig.DefaultQueryExecMode
		db.Close()
		if db.Pooler != c.pooler || mode != c.mode || jit != c.jit {
			t.Errorf("%s: pooler %v, mode %v, jit %s; want %v, %v, %s", c.url, db.Pooler, mode, jit, c.pooler, c.mode, c.jit)
		}
	}
	if !dburl.RefusedStartupParameter(&pgconn.PgError{Severity: "FATAL", Code: "08P01", Message: "unsupported startup parameter: jit"}) {
		t.Error("PgBouncer's refusal not recognised")
	}
}

// TestOpenMySQLStatementBinlog: on a server whose binary log records
// statements, InnoDB refuses writes at READ COMMITTED, so connections
// from a URL without a level keep the server's (REPEATABLE READ) and can
// write; a level in the URL is still set as given. The server is a
// private MariaDB with --log-bin --binlog-format=STATEMENT.
func TestOpenMySQLStatementBinlog(t *testing.T) {
	install := testserver.Binary(t, "mariadb-install-db", "to run a private MariaDB", "/usr/bin", "/usr/sbin")
	server := testserver.Binary(t, "mariadbd", "to run a private MariaDB", "/usr/sbin", "/usr/local/sbin")
	dir, account := testserver.Dir(t, "outbox-dburl-mariadb-", "mysql", "a private MariaDB")
	data := filepath.Join(dir, "data")
	args := []string{"--no-defaults", "--datadir=" + data, "--auth-root-authentication-method=normal", "--skip-name-resolve"}
	if account.Name != "" {
		args = append(args, "--user="+account.Name)
	}
	if out, err := exec.Command(install, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", install, err, out)
	}
	port := testserver.FreePort(t)
	args = []string{"--no-defaults", "--datadir=" + data, "--port=" + strconv.Itoa(port), "--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(dir, "mariadb.sock"), "--pid-file=" + filepath.Join(dir, "mariadb.pid"),
		"--log-error=" + filepath.Join(dir, "error.log"), "--skip-name-resolve", "--skip-grant-tables",
		"--innodb-buffer-pool-size=32M", "--log-bin=" + filepath.Join(dir, "binlog"), "--binlog-format=STATEMENT", "--server-id=1"}
	if account.Name != "" {
		args = append(args, "--user="+account.Name)
	}
	proc := testserver.Start(t, exec.Command(server, args...), "a private MariaDB")
	t.Cleanup(proc.Kill)
	ctx := context.Background()
	raw := fmt.Sprintf("mysql://root@127.0.0.1:%d/test", port)
	var db *dburl.DB
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		var err error
		if db, err = dburl.Open(ctx, raw); err == nil {
			break
		}
		if proc.Exited() || time.Now().After(deadline) {
			t.Fatalf("private MariaDB on port %d: %v", port, err)
		}
	}
	defer db.Close()
	var level string
	if err := db.SQL.QueryRowContext(ctx, "SELECT @@tx_isolation").Scan(&level); err != nil || level != "REPEATABLE-READ" {
		t.Errorf("%s: tx_isolation = %q, %v; want REPEATABLE-READ", raw, level, err)
	}
	if _, err := db.SQL.ExecContext(ctx, "CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL.ExecContext(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Errorf("write with the server's level: %v", err)
	}
	own, err := dburl.Open(ctx, raw+"?tx_isolation=READ-COMMITTED")
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if err := own.SQL.QueryRowContext(ctx, "SELECT @@tx_isolation").Scan(&level); err != nil || level != "READ-COMMITTED" {
		t.Errorf("level in the URL: tx_isolation = %q, %v; want READ-COMMITTED", level, err)
	}
}
