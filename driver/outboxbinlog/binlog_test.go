package outboxbinlog

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	_ "github.com/go-sql-driver/mysql"

	"github.com/txoutbox/outbox/internal/testkit/testmariadb"
)

// server is a private MariaDB writing a binary log, with the tables the
// tests write: test.outbox_messages, test.other and
// elsewhere.outbox_messages.
func server(t *testing.T) (*testmariadb.Server, *sql.DB) {
	t.Helper()
	s := testmariadb.Start(t, "--log-bin=binlog", "--server-id=7", "--binlog-format=MIXED")
	db, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/test", s.Port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	for _, q := range []string{
		"CREATE TABLE outbox_messages (id BIGINT AUTO_INCREMENT PRIMARY KEY, payload TEXT, state INT DEFAULT 0)",
		"CREATE TABLE other (id BIGINT AUTO_INCREMENT PRIMARY KEY, payload TEXT)",
		"CREATE DATABASE elsewhere",
		"CREATE TABLE elsewhere.outbox_messages (id BIGINT AUTO_INCREMENT PRIMARY KEY, payload TEXT)",
	} {
		exec(t, db, q)
	}
	return s, db
}

func exec(t *testing.T, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(t.Context(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// endOfLog is the binary log's current end.
func endOfLog(t *testing.T, db *sql.DB) mysql.Position {
	t.Helper()
	var file string
	var pos uint32
	var ignored [2]sql.NullString
	if err := db.QueryRow("SHOW MASTER STATUS").Scan(&file, &pos, &ignored[0], &ignored[1]); err != nil {
		t.Fatal(err)
	}
	return mysql.Position{Name: file, Pos: pos}
}

// TestMatcherOnTheServersEvents runs each kind of write on the private
// server, in each binary log format, reads the events it logged with a
// replication client, and counts the commits the matcher reports: only
// inserts into test.outbox_messages count, once per transaction, whether
// logged as rows or as statements.
func TestMatcherOnTheServersEvents(t *testing.T) {
	s, db := server(t)
	cases := []struct {
		name  string
		stmts []string
		want  int
	}{
		{"an insert", []string{"INSERT INTO outbox_messages (payload) VALUES ('a')"}, 1},
		{"a transaction of two inserts", []string{"BEGIN", "INSERT INTO outbox_messages (payload) VALUES ('a')", "INSERT INTO outbox_messages (payload) VALUES ('b')", "COMMIT"}, 1},
		{"a rolled back insert", []string{"BEGIN", "INSERT INTO outbox_messages (payload) VALUES ('a')", "ROLLBACK"}, 0},
		{"an insert into another table", []string{"INSERT INTO other (payload) VALUES ('a')"}, 0},
		{"an update of the table", []string{"UPDATE outbox_messages SET state = 1 WHERE id > 0"}, 0},
		{"a delete from the table", []string{"DELETE FROM outbox_messages WHERE id = 1"}, 0},
		{"two transactions", []string{"INSERT INTO outbox_messages (payload) VALUES ('a')", "INSERT INTO other (payload) VALUES ('a')", "INSERT INTO outbox_messages (payload) VALUES ('b')"}, 2},
		{"an insert with a comment before it", []string{"/* app */ INSERT INTO outbox_messages (payload) VALUES ('c')"}, 1},
	}
	for _, format := range []string{"ROW", "STATEMENT", "MIXED"} {
		for _, tc := range cases {
			t.Run(format+"/"+tc.name, func(t *testing.T) {
				conn, err := db.Conn(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				if _, err := conn.ExecContext(t.Context(), "SET SESSION binlog_format = "+format); err != nil {
					t.Fatal(err)
				}
				from := endOfLog(t, db)
				for _, q := range tc.stmts {
					if _, err := conn.ExecContext(t.Context(), q); err != nil {
						t.Fatalf("%s: %v", q, err)
					}
				}
				to := endOfLog(t, db)
				got := countCommits(t, s, from, to, "test")
				if got != tc.want {
					t.Fatalf("the matcher reported %d commits, want %d", got, tc.want)
				}
			})
		}
	}
	// Logged as rows, the table's schema is known; as a statement, the
	// statement's text only names the table (a feed may report a commit
	// that added nothing: one probe).
	t.Run("ROW/another schema", func(t *testing.T) {
		conn, err := db.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		from := endOfLog(t, db)
		exec(t, conn, "SET SESSION binlog_format = ROW")
		exec(t, conn, "INSERT INTO elsewhere.outbox_messages (payload) VALUES ('x')")
		to := endOfLog(t, db)
		if got := countCommits(t, s, from, to, "test"); got != 0 {
			t.Fatalf("an insert into another schema's table counted for database test: %d", got)
		}
		if got := countCommits(t, s, from, to, ""); got != 1 {
			t.Fatalf("with no database named, an insert into a table of that name counted %d times, want 1", got)
		}
	})
}

// countCommits reads the binary log from from up to to and returns how
// many commits the matcher reports for outbox_messages in schema.
func countCommits(t *testing.T, s *testmariadb.Server, from, to mysql.Position, schema string) int {
	t.Helper()
	if from == to {
		return 0 // nothing logged
	}
	syncer := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID: randomID()%1000000 + 100, Flavor: mysql.MariaDBFlavor, Host: "127.0.0.1", Port: uint16(s.Port), User: "root",
		DisableRetrySync: true, Logger: quiet(),
		RowsEventDecodeFunc: func(e *replication.RowsEvent, data []byte) error {
			_, err := e.DecodeHeader(data)
			return err
		},
	})
	defer syncer.Close()
	stream, err := syncer.StartSync(from)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var m matcher
	m.add(&watcher{schema: schema, table: "outbox_messages"})
	n := 0
	for {
		ev, err := stream.GetEvent(ctx)
		if err != nil {
			t.Fatalf("reading the binary log up to %s: %v", to, err)
		}
		if len(m.event(ev)) > 0 {
			n++
		}
		if ev.Header.LogPos >= to.Pos && ev.Header.EventType != replication.ROTATE_EVENT && ev.Header.EventType != replication.FORMAT_DESCRIPTION_EVENT {
			return n
		}
	}
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestWatch: a feed on the private server calls changed once when it
// follows the log, then for the commit of a producer's insert (plain
// SQL, on its own connection), and stops without an error when its
// context ends.
func TestWatch(t *testing.T) {
	s, db := server(t)
	f, err := OpenURL(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	calls := make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- f.Watch(ctx, "outbox_messages", func() { calls <- struct{}{} })
	}()
	wait := func(what string) {
		t.Helper()
		select {
		case <-calls:
		case err := <-done:
			t.Fatalf("Watch returned before %s: %v", what, err)
		case <-time.After(20 * time.Second):
			t.Fatalf("no call for %s in 20 s", what)
		}
	}
	wait("following the log")
	exec(t, db, "INSERT INTO outbox_messages (payload) VALUES ('a')")
	wait("the insert's commit")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Watch ended by its context returned %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Watch did not return within 20 s of its context's end")
	}
}

// TestWatchSharesOneConnection: the Watch calls of three databases' feeds
// on one server share one replication connection (one Binlog Dump thread
// on the server), and each is called for its own table's inserts only.
func TestWatchSharesOneConnection(t *testing.T) {
	s, db := server(t)
	names := []string{"tenant_a", "tenant_b", "tenant_c"}
	counts := make([]atomic.Int64, len(names))
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for i, name := range names {
		exec(t, db, "CREATE DATABASE "+name)
		exec(t, db, "CREATE TABLE "+name+".outbox_messages (id BIGINT AUTO_INCREMENT PRIMARY KEY, payload TEXT)")
		f, err := OpenURL(fmt.Sprintf("mysql://root@127.0.0.1:%d/%s", s.Port, name))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.Watch(ctx, "outbox_messages", func() { counts[i].Add(1) }); err != nil {
				t.Errorf("Watch of %s: %v", name, err)
			}
		}()
	}
	waitCounts := func(what string, want ...int64) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for i := range want {
			for counts[i].Load() < want[i] {
				if time.Now().After(deadline) {
					t.Fatalf("%s: %s called %d times in 20 s, want %d", what, names[i], counts[i].Load(), want[i])
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	waitCounts("following", 1, 1, 1)
	var dumps int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'").Scan(&dumps); err != nil {
		t.Fatal(err)
	}
	if dumps != 1 {
		t.Fatalf("%d Binlog Dump threads for three feeds of one server, want 1", dumps)
	}
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	exec(t, conn, "SET SESSION binlog_format = ROW")
	exec(t, conn, "INSERT INTO tenant_a.outbox_messages (payload) VALUES ('a')")
	exec(t, conn, "INSERT INTO tenant_b.outbox_messages (payload) VALUES ('b')")
	exec(t, conn, "INSERT INTO tenant_c.outbox_messages (payload) VALUES ('c')")
	// The log is read in order: once tenant_c's insert was reported,
	// every call the first two inserts made has been made.
	waitCounts("after one insert each", 2, 2, 2)
	for i := range names {
		if n := counts[i].Load(); n != 2 {
			t.Errorf("%s called %d times, want 2 (following, its own insert)", names[i], n)
		}
	}
}

// TestWatchLost: when the server is killed, Watch returns an error (the
// relay then probes and tries again); a new Watch follows the restarted
// server.
func TestWatchLost(t *testing.T) {
	s, _ := server(t)
	f, err := New(Config{Addr: fmt.Sprintf("127.0.0.1:%d", s.Port), User: "root", Database: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	done := make(chan error, 1)
	go func() { done <- f.Watch(t.Context(), "outbox_messages", func() { calls.Add(1) }) }()
	deadline := time.Now().Add(20 * time.Second)
	for calls.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the feed did not follow the log within 20 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.Kill(t)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "binary log") {
			t.Fatalf("Watch over a killed server returned %v, want an error about the binary log", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Watch still runs a minute after the server was killed")
	}
	s.Restart(t)
	again := make(chan struct{}, 4)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = f.Watch(ctx, "outbox_messages", func() { again <- struct{}{} }) }()
	select {
	case <-again:
	case <-time.After(20 * time.Second):
		t.Fatal("a new Watch did not follow the restarted server within 20 s")
	}
}

// TestWatchWithoutBinaryLog: on a server that writes no binary log
// (MariaDB's default) Watch fails at once with the reason.
func TestWatchWithoutBinaryLog(t *testing.T) {
	s := testmariadb.Start(t) // started without --log-bin
	f, err := OpenURL(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Watch(t.Context(), "outbox_messages", func() { t.Error("changed called without a binary log") })
	if err == nil || !strings.Contains(err.Error(), "log_bin is OFF") {
		t.Fatalf("Watch = %v, want the server's missing binary log", err)
	}
}

// TestOpenURL: the URL forms, and errors that never show the password.
func TestOpenURL(t *testing.T) {
	f, err := OpenURL("mysql://outbox:s3cret@db.example:3307/orders?tls=skip-verify&parseTime=true")
	if err != nil {
		t.Fatal(err)
	}
	if f.cfg.Addr != "db.example:3307" || f.cfg.User != "outbox" || f.cfg.Password != "s3cret" || f.cfg.Database != "orders" || f.cfg.TLS == nil || !f.cfg.TLS.InsecureSkipVerify {
		t.Fatalf("config %+v", f.cfg)
	}
	if f, err = OpenURL("mariadb://root@localhost/test"); err != nil || f.cfg.Addr != "localhost:3306" || f.cfg.TLS != nil {
		t.Fatalf("mariadb:// URL: %+v, %v", f, err)
	}
	for _, bad := range []string{"postgres://u:s3cret@h/db", "mysql://u:s3cret@h/db?tls=maybe", "mysql:///db", "mysql://u:s3cret@h:%zz/db"} {
		_, err := OpenURL(bad)
		if err == nil {
			t.Fatalf("OpenURL(%q) accepted it", bad)
		}
		if strings.Contains(err.Error(), "s3cret") || strings.ContainsAny(err.Error(), "\n") {
			t.Fatalf("OpenURL(%q): error %q shows the password or is not one line", bad, err)
		}
	}
}
