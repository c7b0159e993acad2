package relaytest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/internal/testkit/testserver"
)

// Crash drives the end-to-end crash test of one destination: a producer
// commits messages with plain SQL, an `outbox relay` process delivers
// them and is killed with SIGKILL mid-stream and restarted several times,
// and a consumer applies every delivery through an inbox on the same
// database. Run checks that each message's effect was applied exactly
// once and logs how many duplicate deliveries reached the consumer.
//
// A test makes a Crash, starts its consumer with Handle (or, for webhooks,
// Effect and Observe) as the handler, and calls Run with the relay's
// destination URL.
type Crash struct {
	// Messages is how many messages the producer commits. Defaults to 3000.
	Messages int
	// Kills is how many times the relay is killed. Defaults to 3.
	Kills int
	// Topic is the messages' topic.
	Topic string
	// Keys, when set, spreads the messages over that many business keys:
	// message seq has key "key-<seq%Keys>" and the JSON payload
	// {"k":<seq%Keys>,"seq":<seq>}, and Run checks that, for each key,
	// the order in which Handle first applied the messages' effects is
	// the order the producer committed them in. Set it before Run, for a
	// destination and consumer that keep each key's order. Zero (the
	// default) cycles keys over 20 values with the payload {"seq":<seq>}
	// and checks no order.
	Keys int

	t     *testing.T
	db    *testdb.DB
	ib    *inbox.Inbox[*sql.Tx]
	mu    sync.Mutex
	seen  map[string]int // deliveries per message id
	total int
	// With Keys: each key's sequence numbers in the order their effects
	// were first applied, and what Handle could not read.
	applied map[int][]int
	bad     []string
}

// NewCrash prepares db (a migrated per-test database of any dialect) for
// a crash test of topic: an effects table and an inbox over db's
// database/sql driver.
func NewCrash(t *testing.T, db *testdb.DB, topic string) *Crash {
	t.Helper()
	if testing.Short() {
		t.Skip("crash end-to-end test: -short")
	}
	db.Exec(t, `CREATE TABLE effects (message_id VARCHAR(64) NOT NULL)`)
	ib, err := inbox.New(db.Std, &inbox.Config{Consumer: "crash-e2e"})
	if err != nil {
		t.Fatal(err)
	}
	return &Crash{Messages: 3000, Kills: 3, Topic: topic, t: t, db: db, ib: ib, seen: map[string]int{}}
}

// Inbox is the consumer's inbox.
func (c *Crash) Inbox() *inbox.Inbox[*sql.Tx] { return c.ib }

// Observe counts one delivery of message id at the consumer.
func (c *Crash) Observe(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[id]++
	c.total++
}

// Effect is the consumer's effect: one row in effects, in the inbox's
// transaction.
func (c *Crash) Effect(ctx context.Context, tx *sql.Tx, m *inbox.Message) error {
	_, err := tx.ExecContext(ctx, testdb.Placeholder(c.db.Dialect, `INSERT INTO effects (message_id) VALUES (?)`), m.ID)
	return err
}

// Handle is a consumer helper's handler: it counts the delivery and
// applies the effect through the inbox.
func (c *Crash) Handle(ctx context.Context, m *inbox.Message) error {
	c.Observe(m.ID)
	applied, err := c.ib.Handle(ctx, m.ID, func(ctx context.Context, tx *sql.Tx) error { return c.Effect(ctx, tx, m) })
	if applied && err == nil && c.Keys > 0 {
		c.firstApplied(m)
	}
	return err
}

// firstApplied records that m's effect was applied for the first time
// (its handler for a key is not run concurrently with another of the key
// when the consumer keeps order, so the record follows the commits).
func (c *Crash) firstApplied(m *inbox.Message) {
	var p struct {
		K   *int `json:"k"`
		Seq *int `json:"seq"`
	}
	err := json.Unmarshal(m.Payload, &p)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err != nil || p.K == nil || p.Seq == nil:
		c.bad = append(c.bad, fmt.Sprintf("message %s: payload %q is not {\"k\":…,\"seq\":…}", m.ID, m.Payload))
	case m.Key != fmt.Sprintf("key-%d", *p.K):
		c.bad = append(c.bad, fmt.Sprintf("message %s (k %d, seq %d) arrived with key %q", m.ID, *p.K, *p.Seq, m.Key))
	default:
		c.applied[*p.K] = append(c.applied[*p.K], *p.Seq)
	}
}

// checkOrder fails the test unless, for each key, every message's effect
// was first applied once and in the producer's order.
func (c *Crash) checkOrder() {
	t := c.t
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.bad {
		t.Error(b)
	}
	n, inversions := 0, 0
	for k := range c.Keys {
		seqs := c.applied[k]
		n += len(seqs)
		for i := 1; i < len(seqs); i++ {
			if seqs[i] <= seqs[i-1] {
				inversions++
				if inversions <= 10 {
					t.Errorf("key-%d: seq %d first applied after seq %d", k, seqs[i], seqs[i-1])
				}
			}
		}
	}
	if inversions > 0 {
		t.Errorf("%d messages first applied out of their key's order", inversions)
	}
	if n != c.Messages {
		t.Errorf("%d first applications recorded by Handle with their key and seq, want %d", n, c.Messages)
	}
	if inversions == 0 && n == c.Messages {
		t.Logf("%d messages over %d keys: each key's effects first applied in the order the producer committed them", n, c.Keys)
	}
}

func (c *Crash) deliveries() (distinct, total int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen), c.total
}

// Run commits the messages, relays them to the destination url (env
// holds extra variables for the relay, such as OUTBOX_WEBHOOK_SECRET)
// through a relay process it kills Kills times, and checks the effects
// once everything is sent and applied. The consumer must be running.
func (c *Crash) Run(url string, env ...string) {
	t := c.t
	t.Helper()
	bin := relayBinary(t)
	if c.Keys > 0 {
		c.mu.Lock()
		c.applied = map[int][]int{}
		c.mu.Unlock()
	}
	produced := c.produce()
	var relay *testserver.Process
	for k := 0; k < c.Kills; k++ {
		relay = startRelay(t, bin, c.db.URL, url, fmt.Sprintf("crash-%d", k), env)
		// Kill once this relay has made some progress: mid-stream, with a
		// batch published and not yet settled as likely as not.
		target := (k + 1) * c.Messages / (c.Kills + 1)
		WaitFor(t, 60*time.Second, fmt.Sprintf("%d messages sent before kill %d", target, k+1), func() bool {
			return c.sent() >= target
		})
		time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
		relay.Kill()
	}
	relay = startRelay(t, bin, c.db.URL, url, "crash-last", env)
	if err := <-produced; err != nil {
		t.Fatalf("producer: %v", err)
	}
	// A generous bound: on a loaded CI machine the last relay and the
	// consumer's redeliveries (MQTT redelivers only on reconnect) can take
	// well over a minute to finish the stream.
	WaitFor(t, 4*time.Minute, "every message sent and applied", func() bool {
		return c.sent() == c.Messages && c.db.Count(t, `SELECT count(*) FROM effects`) >= c.Messages
	})
	relay.Term(t)

	effects := c.db.Count(t, `SELECT count(*) FROM effects`)
	distinct := c.db.Count(t, `SELECT count(DISTINCT message_id) FROM effects`)
	claimed := c.db.Count(t, testdb.Placeholder(c.db.Dialect, `SELECT count(*) FROM outbox_inbox WHERE consumer = ?`), c.ib.Consumer())
	id := "message_id"
	if c.db.Dialect == store.Postgres {
		id = "message_id::text"
	}
	strangers := c.db.Count(t, `SELECT count(*) FROM effects WHERE message_id NOT IN (SELECT `+id+` FROM outbox_messages)`)
	seen, total := c.deliveries()
	t.Logf("%s: %d messages, %d relay kills, %d deliveries of %d ids at the consumer: %d duplicates reached it; %d effects",
		c.db.Dialect, c.Messages, c.Kills, total, seen, total-seen, effects)
	if effects != c.Messages || distinct != c.Messages || claimed != c.Messages || strangers != 0 {
		t.Fatalf("%d effects (%d distinct, %d inbox records, %d of unknown ids) for %d messages", effects, distinct, claimed, strangers, c.Messages)
	}
	if seen != c.Messages {
		t.Fatalf("the consumer saw %d message ids, want %d", seen, c.Messages)
	}
	if c.Keys > 0 {
		c.checkOrder()
	}
}

// sent is how many of the messages the relay has marked sent.
func (c *Crash) sent() int {
	return c.db.Count(c.t, `SELECT count(*) FROM outbox_messages WHERE `+c.db.Status()+` = 'sent'`)
}

// produce commits the messages in the background with plain SQL, 50 rows
// per INSERT, as a producer in any language would. Keys cycle over 20
// values, or Keys. The channel yields the first error, or nil once all are in.
func (c *Crash) produce() <-chan error {
	done := make(chan error, 1)
	go func() {
		const chunk = 50
		for from := 0; from < c.Messages; from += chunk {
			n := min(chunk, c.Messages-from)
			rows := make([]string, n)
			args := make([]any, 0, 3*n)
			for i := range n {
				seq := from + i
				rows[i] = "(?, ?, ?)"
				if c.Keys > 0 {
					args = append(args, c.Topic, fmt.Sprintf("key-%d", seq%c.Keys), fmt.Sprintf(`{"k":%d,"seq":%d}`, seq%c.Keys, seq))
				} else {
					args = append(args, c.Topic, fmt.Sprintf("key-%d", seq%20), fmt.Sprintf(`{"seq":%d}`, seq))
				}
			}
			q := testdb.Placeholder(c.db.Dialect, `INSERT INTO outbox_messages (topic, business_key, payload) VALUES `+strings.Join(rows, ", "))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err := c.db.SQL.ExecContext(ctx, q, args...)
			cancel()
			if err != nil {
				done <- err
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
		done <- nil
	}()
	return done
}

// startRelay runs the outbox binary's relay over dbURL to url, killed at
// cleanup if still running. Leases last 1 s, so a killed relay's
// partitions are taken over quickly.
func startRelay(t *testing.T, bin, dbURL, url, id string, env []string) *testserver.Process {
	t.Helper()
	cmd := exec.Command(bin, "relay", "--db", dbURL, "--to", url, "--id", id,
		"--batch-size", "100", "--lease-ttl", "1s", "--max-poll", "50ms",
		"--retry-base", "20ms", "--retry-cap", "200ms", "--log-level", "warn")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	return testserver.Spawn(t, cmd, "relay")
}

// The outbox binary, built once for the tests of a process that run at
// the same time (or, under Main, for all of them), removed when the last
// of them ends.
var binary struct {
	mu   sync.Mutex
	refs int
	dir  string
}

// BinaryEnv names the variable that may hold the path of an outbox
// binary built from this tree (make test builds one before the tests):
// the tests then run it instead of building their own.
const BinaryEnv = "OUTBOX_TEST_BINARY"

// relayBinary builds ./cmd/outbox (the build cache makes it a link) and
// returns its path, valid until the test ends.
func relayBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv(BinaryEnv); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s: %v", BinaryEnv, err)
		}
		return bin
	}
	binary.mu.Lock()
	defer binary.mu.Unlock()
	if binary.dir == "" {
		dir, err := os.MkdirTemp("", "outbox-relaytest-")
		if err != nil {
			t.Fatal(err)
		}
		// go test puts the go command it runs under first on PATH.
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "outbox"), "github.com/txoutbox/outbox/cmd/outbox")
		if out, err := cmd.CombinedOutput(); err != nil {
			_ = os.RemoveAll(dir)
			t.Fatalf("build the outbox command: %v\n%s", err, out)
		}
		binary.dir = dir
	}
	binary.refs++
	path := filepath.Join(binary.dir, "outbox")
	t.Cleanup(releaseBinary)
	return path
}

// releaseBinary drops a hold on the binary and removes it with the last.
func releaseBinary() {
	binary.mu.Lock()
	defer binary.mu.Unlock()
	binary.refs--
	if binary.refs == 0 && binary.dir != "" {
		_ = os.RemoveAll(binary.dir)
		binary.dir = ""
	}
}

// Main runs a package's tests (call it from TestMain: os.Exit(Main(m)))
// keeping the outbox binary StartRelay runs, built at most once, until
// the last of them ends: without it each top-level test that starts
// relays links the binary again.
func Main(m *testing.M) int {
	binary.mu.Lock()
	binary.refs++
	binary.mu.Unlock()
	defer releaseBinary()
	return m.Run()
}

// LostAcks wraps a consumer handler so that each message's first delivery
// fails after handler succeeded, as if its acknowledgement were lost: the
// broker must deliver it again. Twice reports how many message ids have
// been delivered at least twice.
func LostAcks(handler func(context.Context, *inbox.Message) error) (wrapped func(context.Context, *inbox.Message) error, twice func() int) {
	var mu sync.Mutex
	seen := map[string]int{}
	wrapped = func(ctx context.Context, m *inbox.Message) error {
		if err := handler(ctx, m); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		seen[m.ID]++
		if seen[m.ID] == 1 {
			return fmt.Errorf("simulated lost ack of %s", m.ID)
		}
		return nil
	}
	twice = func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, d := range seen {
			if d >= 2 {
				n++
			}
		}
		return n
	}
	return wrapped, twice
}

// CheckEffects fails the test unless the effects table of db (made by
// Effects) holds exactly one row for each of the n messages marked sent.
// db must be PostgreSQL.
func CheckEffects(t testing.TB, db *testdb.DB, n int) {
	t.Helper()
	if got := db.Count(t, `SELECT count(*) FROM effects`); got != n {
		t.Errorf("%d effects, want %d", got, n)
	}
	if got := db.Count(t, `SELECT count(DISTINCT message_id) FROM effects`); got != n {
		t.Errorf("%d distinct effects, want %d", got, n)
	}
	for _, id := range SentIDs(t, db) {
		if db.Count(t, `SELECT count(*) FROM effects WHERE message_id = $1`, id) != 1 {
			t.Errorf("message %s: not applied exactly once", id)
		}
	}
}
