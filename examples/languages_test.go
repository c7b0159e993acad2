package examples_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/publisher"
)

// producer is one of examples/'s producers in another language.
type producer struct {
	name    string
	command func(t *testing.T, db *testdb.DB, orders, keys string) *exec.Cmd
}

var producers = []producer{
	{"php", func(t *testing.T, db *testdb.DB, orders, keys string) *exec.Cmd {
		php := testdb.Command(t, "php", "", "scripts/languages.sh installs php-cli, php-pgsql and php-mysql")
		u := dbURL(t, db)
		cmd := exec.Command(php, filepath.Join("php", "producer.php"))
		dsn := "mysql:host=" + u.Hostname() + ";port=" + u.Port() + ";dbname=" + strings.TrimPrefix(u.Path, "/")
		if db.Dialect == store.Postgres {
			dsn = "pgsql:host=" + u.Hostname() + ";port=" + u.Port() + ";dbname=" + strings.TrimPrefix(u.Path, "/")
		}
		pw, _ := u.User.Password()
		cmd.Env = append(os.Environ(), "OUTBOX_PDO_DSN="+dsn, "OUTBOX_PDO_USER="+u.User.Username(), "OUTBOX_PDO_PASSWORD="+pw,
			"OUTBOX_PDO_SCHEMA="+u.Query().Get("search_path"), "ORDERS="+orders, "KEYS="+keys)
		return cmd
	}},
	{"java", func(t *testing.T, db *testdb.DB, orders, keys string) *exec.Cmd {
		java := testdb.Command(t, "java", "", "a JDK")
		u := dbURL(t, db)
		jar, jdbc := "/usr/share/java/mariadb-java-client.jar", "jdbc:mariadb://"+u.Host+u.Path+"?user="+u.User.Username()
		if db.Dialect == store.Postgres {
			jar, jdbc = "/usr/share/java/postgresql.jar", "jdbc:postgresql://"+u.Host+u.Path+"?user="+u.User.Username()+"&currentSchema="+u.Query().Get("search_path")
		}
		if pw, ok := u.User.Password(); ok {
			jdbc += "&password=" + url.QueryEscape(pw)
		}
		if _, err := os.Stat(jar); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is missing (CI=true, so this fails; scripts/languages.sh installs it)", jar)
			}
			t.Skipf("skipping outside CI: %s is missing (scripts/languages.sh installs it)", jar)
		}
		return exec.Command(java, "-cp", jar, filepath.Join("java", "Producer.java"), jdbc, orders, keys)
	}},
}

// TestProducersInOtherLanguages runs the PHP and Java producers against
// PostgreSQL and MariaDB, each writing orders and their messages in its
// own transactions with plain SQL, while a relay delivers: every message
// the producer committed arrives exactly once, with its payload and
// headers, in order per business key, and is marked sent.
func TestProducersInOtherLanguages(t *testing.T) {
	if testing.Short() {
		t.Skip("runs PHP and Java: -short")
	}
	const orders, keys = 200, 7
	for _, p := range producers {
		for _, d := range []store.Dialect{store.Postgres, store.MySQL} {
			t.Run(p.name+"/"+string(d), func(t *testing.T) {
				db := testdb.New(t, d)
				db.Exec(t, "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer VARCHAR(64) NOT NULL, total BIGINT NOT NULL)")
				got := &arrivals{seen: map[string]int{}}
				relaytest.Start(t, db, relaytest.Config(outbox.PublisherFunc(got.deliver)))

				var stdout, stderr bytes.Buffer
				cmd := p.command(t, db, strconv.Itoa(orders), strconv.Itoa(keys))
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				if err := cmd.Run(); err != nil {
					t.Fatalf("%s producer: %v\n%s", p.name, err, stderr.String())
				}
				ids := strings.Fields(stdout.String())
				if len(ids) != orders {
					t.Fatalf("%s producer printed %d message ids, want %d\n%s", p.name, len(ids), orders, stderr.String())
				}
				relaytest.WaitFor(t, 60*time.Second, "every message delivered", func() bool { return got.count() >= orders })
				relaytest.WaitFor(t, 30*time.Second, "every message marked sent", func() bool {
					return relaytest.Count(t, db, "sent") == orders
				})
				got.check(t, ids, p.name)
				if n := db.Count(t, "SELECT count(*) FROM orders"); n != orders {
					t.Errorf("%d orders, want %d", n, orders)
				}
			})
		}
	}
}

// arrivals records what the relay delivered.
type arrivals struct {
	mu    sync.Mutex
	seen  map[string]int
	order []delivered
}

type delivered struct {
	id, key, producer string
	orderID           int
}

func (a *arrivals) deliver(_ context.Context, env *outbox.Envelope) error {
	var body struct {
		OrderID int `json:"order_id"`
	}
	if err := json.Unmarshal(env.Payload, &body); err != nil {
		return publisher.Permanent(err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen[env.ID]++
	a.order = append(a.order, delivered{env.ID, env.Key, env.Headers["producer"], body.OrderID})
	return nil
}

func (a *arrivals) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.seen)
}

// check: exactly the committed ids, once each, with the producer's header,
// and per key in the order the producer committed them.
func (a *arrivals) check(t *testing.T, ids []string, producer string) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range ids {
		if a.seen[id] != 1 {
			t.Errorf("message %s arrived %d times, want once", id, a.seen[id])
		}
	}
	if len(a.seen) != len(ids) {
		t.Errorf("%d distinct messages arrived, the producer committed %d", len(a.seen), len(ids))
	}
	last := map[string]int{}
	for _, d := range a.order {
		if d.producer != producer {
			t.Errorf("message %s: header producer = %q, want %q", d.id, d.producer, producer)
		}
		if d.orderID <= last[d.key] {
			t.Errorf("key %s: order %d arrived after order %d", d.key, d.orderID, last[d.key])
		}
		last[d.key] = d.orderID
	}
}

func dbURL(t *testing.T, db *testdb.DB) *url.URL {
	t.Helper()
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
