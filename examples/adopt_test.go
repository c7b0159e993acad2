package examples_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/adopt/adoptstore"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/adopttest"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestPHPLocalMessages runs the PHP producer that writes the Laravel
// guide's local_messages table (an order and its message per PDO
// transaction) against PostgreSQL and MariaDB while a real `outbox relay
// --adopt laravel` process delivers to a webhook: every row the producer
// committed arrives exactly once, under the message id derived from its
// row, and every row ends `sent`.
func TestPHPLocalMessages(t *testing.T) {
	if testing.Short() {
		t.Skip("runs PHP: -short")
	}
	const orders = 150
	for _, d := range []store.Dialect{store.Postgres, store.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			php := testdb.Command(t, "php", "", "scripts/languages.sh installs php-cli, php-pgsql and php-mysql")
			db := testdb.New(t, d)
			db.Exec(t, "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR(64) NOT NULL, total BIGINT NOT NULL)")
			adopttest.Create(t, db, "laravel")

			var mu sync.Mutex
			seen := map[string]int{}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen[r.Header.Get("webhook-id")]++
				mu.Unlock()
			}))
			t.Cleanup(srv.Close)
			relay := relaytest.StartRelay(t, db.URL, "--adopt", "laravel", "--to", srv.URL+"/orders", "--max-poll", "100ms")

			u := dbURL(t, db)
			dsn := "mysql:host=" + u.Hostname() + ";port=" + u.Port() + ";dbname=" + strings.TrimPrefix(u.Path, "/")
			if d == store.Postgres {
				dsn = "pgsql:host=" + u.Hostname() + ";port=" + u.Port() + ";dbname=" + strings.TrimPrefix(u.Path, "/")
			}
			pw, _ := u.User.Password()
			cmd := exec.Command(php, filepath.Join("php", "local_messages.php"))
			cmd.Env = append(os.Environ(), "OUTBOX_PDO_DSN="+dsn, "OUTBOX_PDO_USER="+u.User.Username(), "OUTBOX_PDO_PASSWORD="+pw,
				"OUTBOX_PDO_SCHEMA="+u.Query().Get("search_path"), "ORDERS="+strconv.Itoa(orders))
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("php producer: %v\n%s", err, stderr.String())
			}
			rows := strings.Fields(stdout.String())
			if len(rows) != orders {
				t.Fatalf("the producer printed %d row ids, want %d\n%s", len(rows), orders, stderr.String())
			}
			relaytest.WaitFor(t, 60*time.Second, "every row sent", func() bool {
				return db.Count(t, "SELECT count(*) FROM local_messages WHERE status = 'sent'") == orders
			})
			relay.Stop(t)
			mu.Lock()
			defer mu.Unlock()
			for _, row := range rows {
				id, err := strconv.ParseInt(row, 10, 64)
				if err != nil {
					t.Fatalf("row id %q: %v", row, err)
				}
				if n := seen[adoptstore.DerivedMessageID("local_messages", id)]; n != 1 {
					t.Errorf("row %d arrived %d times, want once", id, n)
				}
			}
			if len(seen) != orders {
				t.Errorf("%d distinct messages arrived, the producer committed %d", len(seen), orders)
			}
			if n := db.Count(t, "SELECT count(*) FROM orders"); n != orders {
				t.Errorf("%d orders, want %d", n, orders)
			}
		})
	}
}
