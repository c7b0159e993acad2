package tooltest

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"ariga.io/atlas/sql/migrate"
	gomigrate "github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/mysql"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	_ "github.com/golang-migrate/migrate/v4/database/sqlite"
	_ "github.com/golang-migrate/migrate/v4/source/file"
	"github.com/pressly/goose/v3"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// tool applies and rolls back a directory of migration files.
type tool struct {
	format string
	up     func(t *testing.T, db *testdb.DB, dir string)
	down   func(t *testing.T, db *testdb.DB, dir string)
}

var tools = []tool{
	{"goose", gooseRun(false), gooseRun(true)},
	{"golang-migrate", gomigrateRun(false), gomigrateRun(true)},
}

// TestToolsApplyTheSchema writes the schema in two steps, as an
// application that adopted an older outbox and upgrades later would
// (versions 1–3, then --from 3), numbered after two migrations of the
// application's own; applies each step with the tool; checks that the
// outbox sees its newest schema and that a relay delivers on it; then
// rolls everything back with the tool and checks that no outbox table is
// left.
func TestToolsApplyTheSchema(t *testing.T) {
	type layout struct {
		name string
		d    store.Dialect
		args []string
	}
	layouts := []layout{{"postgres-partitioned", store.Postgres, []string{"--partitioned"}}}
	for _, d := range testdb.Dialects {
		layouts = append(layouts, layout{string(d), d, nil})
	}
	for _, tl := range tools {
		for _, l := range layouts {
			d := l.d
			t.Run(tl.format+"/"+l.name, func(t *testing.T) {
				db := testdb.Empty(t, d)
				dir := t.TempDir()
				base := append([]string{"--dialect", string(d), "--format", tl.format, "--out", dir}, l.args...)
				writeFiles(t, append(base, "--start", "3")...)
				keep := dropAbove(t, dir, tl.format, 3)
				tl.up(t, db, dir)
				if v := schemaVersion(t, db); v != 3 {
					t.Fatalf("after the first step the outbox schema is at version %d, want 3", v)
				}
				writeFiles(t, append(base, "--from", "3", "--start", "6")...)
				sameAsKept(t, dir, keep)
				tl.up(t, db, dir)
				latest := newest(t, d)
				if v := schemaVersion(t, db); v != latest {
					t.Fatalf("outbox schema at version %d after the tool's up, want %d", v, latest)
				}
				applied, err := outbox.Migrate(context.Background(), db.Std, nil)
				if err != nil || len(applied) != 0 {
					t.Fatalf("outbox.Migrate after the tool = %v, %v; want nothing left to apply", applied, err)
				}
				deliverOne(t, db)
				tl.down(t, db, dir)
				if left := outboxTables(t, db); len(left) != 0 {
					t.Fatalf("after the tool rolled everything back these tables remain: %v", left)
				}
			})
		}
	}
}

// TestAtlasReadsTheFiles checks the atlas directory with atlas's own
// code: the checksum file matches, and atlas splits every file into the
// statements the outbox wrote (function bodies whole).
func TestAtlasReadsTheFiles(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(string(d), func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, "--dialect", string(d), "--format", "atlas", "--out", dir)
			ld, err := migrate.NewLocalDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := migrate.Validate(ld); err != nil {
				t.Fatalf("atlas rejects the directory's checksum: %v", err)
			}
			files, err := ld.Files()
			if err != nil {
				t.Fatal(err)
			}
			ms, err := store.MigrationsWith(d, store.MigrateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != len(ms) {
				t.Fatalf("atlas sees %d migration files, want %d", len(files), len(ms))
			}
			for i, f := range files {
				stmts, err := f.Stmts()
				if err != nil {
					t.Fatalf("atlas cannot split %s: %v", f.Name(), err)
				}
				// The bookkeeping table, the version's statements, its
				// version row.
				want := 2 + len(store.SplitStatements(ms[i].SQL))
				if len(stmts) != want {
					t.Fatalf("atlas splits %s into %d statements, want %d:\n%s", f.Name(), len(stmts), want, strings.Join(stmts, "\n---\n"))
				}
			}
		})
	}
}

// writeFiles runs outbox migrate sql with args.
func writeFiles(t *testing.T, args ...string) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(outboxBinary(t), append([]string{"migrate", "sql"}, args...)...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("outbox migrate sql %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
}

// The outbox command: the one make test built (OUTBOX_TEST_BINARY), or
// one built here once from the checkout's workspace, removed by TestMain.
var command struct {
	once sync.Once
	path string
	err  error
	dir  string
}

func outboxBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("OUTBOX_TEST_BINARY"); bin != "" {
		return bin
	}
	command.once.Do(func() {
		command.dir, command.err = os.MkdirTemp("", "outbox-tooltest-")
		if command.err != nil {
			return
		}
		work, err := filepath.Abs("../../go.work")
		if err != nil {
			command.err = err
			return
		}
		command.path = filepath.Join(command.dir, "outbox")
		build := exec.Command("go", "build", "-o", command.path, ".")
		build.Dir = "../../cmd/outbox"
		build.Env = append(os.Environ(), "GOWORK="+work)
		if out, err := build.CombinedOutput(); err != nil {
			command.err = fmt.Errorf("build the outbox command: %v\n%s", err, out)
		}
	})
	if command.err != nil {
		t.Fatal(command.err)
	}
	return command.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if command.dir != "" {
		_ = os.RemoveAll(command.dir)
	}
	os.Exit(code)
}

// dropAbove moves the files of outbox versions above v out of dir and
// returns them, to put back with restore.
func dropAbove(t *testing.T, dir, format string, v int) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string][]byte{}
	for _, e := range entries {
		var n int
		if _, err := fmt.Sscanf(e.Name(), "%05d_", &n); err != nil {
			t.Fatalf("%s file %s: no version number", format, e.Name())
		}
		if n-2 > v { // files are numbered from 3: outbox version = n - 2
			p := filepath.Join(dir, e.Name())
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			kept[e.Name()] = b
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(kept) == 0 {
		t.Fatalf("no %s files above version %d", format, v)
	}
	return kept
}

// sameAsKept checks that the second step wrote the very files the first
// one had set aside: --from N writes what the full schema has above N.
func sameAsKept(t *testing.T, dir string, kept map[string][]byte) {
	t.Helper()
	for name, want := range kept {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("--from 3 --start 6 did not write %s: %v", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s written by --from 3 differs from the full schema's:\n%s\n---\n%s", name, got, want)
		}
	}
}

func newest(t *testing.T, d store.Dialect) int {
	ms, err := store.MigrationsWith(d, store.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ms[len(ms)-1].Version
}

func schemaVersion(t *testing.T, db *testdb.DB) int {
	t.Helper()
	v, err := store.SchemaVersion(context.Background(), db.Store().DB())
	if err != nil {
		t.Fatalf("read the outbox schema version: %v", err)
	}
	return v
}

// deliverOne enqueues a message and runs a relay until it is sent.
func deliverOne(t *testing.T, db *testdb.DB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	producer, err := outbox.NewProducer(db.Std, nil)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := producer.Enqueue(ctx, tx, outbox.Message{Topic: "tool.check", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	relay, err := outbox.NewRelay(db.Std, &outbox.RelayConfig{
		Routes: []outbox.Route{{Pattern: "*", Publisher: outbox.PublisherFunc(func(_ context.Context, env *outbox.Envelope) error {
			select {
			case got <- env.ID:
			default:
			}
			return nil
		})}},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- relay.Run(ctx) }()
	if got := <-got; got != id {
		t.Fatalf("relay delivered %s, want %s", got, id)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// outboxTables lists the tables named outbox_* in db's schema.
func outboxTables(t *testing.T, db *testdb.DB) []string {
	t.Helper()
	q := map[store.Dialect]string{
		store.Postgres: "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_name LIKE 'outbox%'",
		store.MySQL:    "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE 'outbox%'",
		store.SQLite:   "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'outbox%'",
	}[db.Dialect]
	return db.Strings(t, q)
}

func gooseRun(down bool) func(t *testing.T, db *testdb.DB, dir string) {
	return func(t *testing.T, db *testdb.DB, dir string) {
		t.Helper()
		dialect := map[store.Dialect]goose.Dialect{store.Postgres: goose.DialectPostgres, store.MySQL: goose.DialectMySQL, store.SQLite: goose.DialectSQLite3}[db.Dialect]
		p, err := goose.NewProvider(dialect, db.SQL, os.DirFS(dir))
		if err != nil {
			t.Fatal(err)
		}
		if down {
			_, err = p.DownTo(context.Background(), 0)
		} else {
			_, err = p.Up(context.Background())
		}
		if err != nil {
			t.Fatalf("goose (down=%v): %v", down, err)
		}
	}
}

func gomigrateRun(down bool) func(t *testing.T, db *testdb.DB, dir string) {
	return func(t *testing.T, db *testdb.DB, dir string) {
		t.Helper()
		m, err := gomigrate.New("file://"+dir, gomigrateURL(t, db))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _, _ = m.Close() }()
		if down {
			err = m.Down()
		} else {
			err = m.Up()
		}
		if err != nil && err != gomigrate.ErrNoChange {
			t.Fatalf("golang-migrate (down=%v): %v", down, err)
		}
	}
}

// gomigrateURL is db's URL in golang-migrate's form for its driver.
func gomigrateURL(t *testing.T, db *testdb.DB) string {
	t.Helper()
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	switch db.Dialect {
	case store.Postgres:
		u.Scheme = "pgx5"
		return u.String()
	case store.MySQL:
		user := u.User.Username()
		if pw, ok := u.User.Password(); ok {
			user += ":" + pw
		}
		return fmt.Sprintf("mysql://%s@tcp(%s)%s?multiStatements=true", user, u.Host, u.Path)
	default:
		return "sqlite://" + strings.TrimPrefix(db.URL, "sqlite://")
	}
}
