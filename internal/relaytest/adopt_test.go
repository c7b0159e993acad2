package relaytest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/txoutbox/outbox/internal/relaytest"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
)

// seedTables are the local message tables of the seed articles: the
// MySQL DDL as the articles print it, and its PostgreSQL and SQLite
// equivalents. The Laravel guide's DDL lacks the primary key its
// AUTO_INCREMENT column needs (MySQL refuses it without one; Laravel's
// own migrations always add it), so it has the key added.
var seedTables = map[string]map[store.Dialect]string{
	"laravel": {
		store.MySQL: "CREATE TABLE `local_messages` (\n" +
			"  `id` bigint unsigned NOT NULL AUTO_INCREMENT,\n" +
			"  `topic` varchar(100) NOT NULL COMMENT '消息主题（如order.created）',\n" +
			"  `payload` json NOT NULL COMMENT '消息体（序列化的业务数据）',\n" +
			"  `status` enum('pending','sent','failed') DEFAULT 'pending',\n" +
			"  `retry_times` tinyint unsigned DEFAULT '0' COMMENT '已重试次数',\n" +
			"  `max_retry_times` tinyint unsigned DEFAULT '3' COMMENT '最大重试次数',\n" +
			"  `next_retry_at` datetime DEFAULT NULL COMMENT '下次重试时间',\n" +
			"  `created_at` timestamp NULL DEFAULT NULL,\n" +
			"  `updated_at` timestamp NULL DEFAULT NULL,\n" +
			"  PRIMARY KEY (`id`),\n" +
			"  INDEX `status_next_retry_at` (`status`, `next_retry_at`)\n" +
			") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;",
		store.Postgres: `CREATE TABLE local_messages (
  id bigserial NOT NULL,
  topic varchar(100) NOT NULL,
  payload json NOT NULL,
  status varchar(255) CHECK (status IN ('pending', 'sent', 'failed')) DEFAULT 'pending',
  retry_times smallint DEFAULT 0,
  max_retry_times smallint DEFAULT 3,
  next_retry_at timestamp(0) DEFAULT NULL,
  created_at timestamp(0) NULL DEFAULT NULL,
  updated_at timestamp(0) NULL DEFAULT NULL
);
CREATE INDEX status_next_retry_at ON local_messages (status, next_retry_at)`,
		store.SQLite: `CREATE TABLE local_messages (
  id integer PRIMARY KEY AUTOINCREMENT NOT NULL,
  topic varchar NOT NULL,
  payload text NOT NULL,
  status varchar CHECK (status IN ('pending', 'sent', 'failed')) DEFAULT 'pending',
  retry_times integer DEFAULT 0,
  max_retry_times integer DEFAULT 3,
  next_retry_at datetime DEFAULT NULL,
  created_at datetime NULL DEFAULT NULL,
  updated_at datetime NULL DEFAULT NULL
);
CREATE INDEX status_next_retry_at ON local_messages (status, next_retry_at)`,
	},
	"spring": {
		store.MySQL: `CREATE TABLE t_local_message (
id BIGINT AUTO_INCREMENT PRIMARY KEY,
message_id VARCHAR(64) NOT NULL COMMENT '消息唯一ID',
topic VARCHAR(100) NOT NULL COMMENT '消息Topic',
tag VARCHAR(100) COMMENT '消息Tag',
business_key VARCHAR(128) NOT NULL COMMENT '业务唯一键（幂等用）',
payload TEXT NOT NULL COMMENT '消息体JSON',
status VARCHAR(20) NOT NULL DEFAULT 'PENDING' COMMENT 'PENDING/SENT/CONSUMED/FAILED',
retry_count INT NOT NULL DEFAULT 0 COMMENT '已重试次数',
max_retry INT NOT NULL DEFAULT 10 COMMENT '最大重试次数',
next_retry_time TIMESTAMP COMMENT '下次重试时间',
error_msg TEXT COMMENT '最后失败原因',
create_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
update_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
UNIQUE KEY uk_message_id (message_id),
INDEX idx_status_next_retry (status, next_retry_time)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COMMENT='本地消息表';`,
		store.Postgres: `CREATE TABLE t_local_message (
id BIGSERIAL PRIMARY KEY,
message_id VARCHAR(64) NOT NULL,
topic VARCHAR(100) NOT NULL,
tag VARCHAR(100),
business_key VARCHAR(128) NOT NULL,
payload TEXT NOT NULL,
status VARCHAR(20) NOT NULL DEFAULT 'PENDING',
retry_count INT NOT NULL DEFAULT 0,
max_retry INT NOT NULL DEFAULT 10,
next_retry_time TIMESTAMP,
error_msg TEXT,
create_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
update_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
CONSTRAINT uk_message_id UNIQUE (message_id)
);
CREATE INDEX idx_status_next_retry ON t_local_message (status, next_retry_time)`,
		store.SQLite: `CREATE TABLE t_local_message (
id INTEGER PRIMARY KEY AUTOINCREMENT,
message_id VARCHAR(64) NOT NULL,
topic VARCHAR(100) NOT NULL,
tag VARCHAR(100),
business_key VARCHAR(128) NOT NULL,
payload TEXT NOT NULL,
status VARCHAR(20) NOT NULL DEFAULT 'PENDING',
retry_count INT NOT NULL DEFAULT 0,
max_retry INT NOT NULL DEFAULT 10,
next_retry_time TIMESTAMP,
error_msg TEXT,
create_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
update_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
CONSTRAINT uk_message_id UNIQUE (message_id)
);
CREATE INDEX idx_status_next_retry ON t_local_message (status, next_retry_time)`,
	},
	"codes": {
		store.MySQL:    "CREATE TABLE local_message ( id BIGINT PRIMARY KEY AUTO_INCREMENT, msg_id VARCHAR(64) NOT NULL COMMENT '消息唯一id，幂等key', topic VARCHAR(64) NOT NULL COMMENT 'MQ主题', msg_content TEXT NOT NULL COMMENT '消息体JSON', status TINYINT NOT NULL COMMENT '消息状态：0待发送，1已发送，2发送失败，3已消费', retry_count INT DEFAULT 0 COMMENT '重试次数', next_retry_time DATETIME COMMENT '下一次重试时间（退避）', create_time DATETIME NOT NULL, update_time DATETIME NOT NULL, UNIQUE KEY uk_msg_id(msg_id) );",
		store.Postgres: "CREATE TABLE local_message ( id BIGSERIAL PRIMARY KEY, msg_id VARCHAR(64) NOT NULL, topic VARCHAR(64) NOT NULL, msg_content TEXT NOT NULL, status SMALLINT NOT NULL, retry_count INT DEFAULT 0, next_retry_time TIMESTAMP, create_time TIMESTAMP NOT NULL, update_time TIMESTAMP NOT NULL, CONSTRAINT uk_msg_id UNIQUE (msg_id) )",
		store.SQLite:   "CREATE TABLE local_message ( id INTEGER PRIMARY KEY AUTOINCREMENT, msg_id VARCHAR(64) NOT NULL, topic VARCHAR(64) NOT NULL, msg_content TEXT NOT NULL, status TINYINT NOT NULL, retry_count INT DEFAULT 0, next_retry_time DATETIME, create_time DATETIME NOT NULL, update_time DATETIME NOT NULL, CONSTRAINT uk_msg_id UNIQUE (msg_id) )",
	},
}

// seedTable is each profile's table and the status its delivered rows end in.
var seedTable = map[string]struct{ table, status, sent, attempts string }{
	"laravel": {"local_messages", "status", "sent", "retry_times"},
	"spring":  {"t_local_message", "status", "SENT", "retry_count"},
	"codes":   {"local_message", "status", "1", "retry_count"},
}

// nowSQL is the current time as the applications' statements write it.
func nowSQL(d store.Dialect) string {
	switch d {
	case store.MySQL:
		return "NOW()"
	case store.SQLite:
		return "datetime('now')"
	}
	return "LOCALTIMESTAMP(0)"
}

// createSeed creates profile's table in db from its DDL.
func createSeed(t *testing.T, db *testdb.DB, profile string) {
	t.Helper()
	for stmt := range strings.SplitSeq(seedTables[profile][db.Dialect], ";\n") {
		db.Exec(t, stmt)
	}
}

// insertSeed writes row seq of profile's table the way its article's
// code does: Laravel's LocalMessage::create (topic, payload,
// max_retry_times and Eloquent's timestamps), Spring's mapper insert of a
// full LocalMessage (a UUID message id, tag, business key, PENDING, the
// retry fields, next_retry_time now), the design note's insert with
// status 0. Keys spread rows over keys keys; payload is
// {"k":key,"seq":seq}, which relaytest.KeyOrder reads.
func insertSeed(t *testing.T, db *testdb.DB, profile string, seq, keys int, topic string) {
	t.Helper()
	k := seq % keys
	payload := fmt.Sprintf(`{"k":%d,"seq":%d}`, k, seq)
	now := nowSQL(db.Dialect)
	var q string
	var args []any
	switch profile {
	case "laravel":
		q = "INSERT INTO local_messages (topic, payload, max_retry_times, updated_at, created_at) VALUES (?, ?, 3, " + now + ", " + now + ")"
		args = []any{topic, payload}
	case "spring":
		q = "INSERT INTO t_local_message (message_id, topic, tag, business_key, payload, status, retry_count, max_retry, next_retry_time, create_time) VALUES (?, ?, ?, ?, ?, 'PENDING', 0, 10, " + now + ", " + now + ")"
		args = []any{uuid.NewString(), topic, "sync-crm", fmt.Sprintf("user-%d", k), payload}
	case "codes":
		q = "INSERT INTO local_message (msg_id, topic, msg_content, status, retry_count, create_time, update_time) VALUES (?, ?, ?, 0, 0, " + now + ", " + now + ")"
		args = []any{uuid.NewString(), topic, payload}
	}
	db.Exec(t, testdb.Placeholder(db.Dialect, q), args...)
}

// hooks is a webhook endpoint that records every delivery; fail decides,
// per request body, whether to answer 500.
type hooks struct {
	fail  func(body string) bool
	keyed bool // check per-key order

	mu     sync.Mutex
	order  relaytest.KeyOrder
	t      *testing.T
	ids    map[string]int
	tags   map[string]string
	total  int
	failed int
}

func newHooks(t *testing.T, keyed bool, fail func(string) bool) (*hooks, string) {
	h := &hooks{fail: fail, keyed: keyed, t: t, ids: map[string]int{}, tags: map[string]string{}}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv.URL + "/hooks"
}

func (h *hooks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail != nil && h.fail(string(body)) {
		h.failed++
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	id := r.Header.Get("webhook-id")
	h.total++
	h.ids[id]++
	h.tags[id] = r.Header.Get("tag")
	if h.keyed {
		h.order.Check(h.t, id, body)
	}
	w.WriteHeader(http.StatusOK)
}

func (h *hooks) distinct() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ids)
}

// adoptArgs are the relay flags of the adopt tests: short leases, fast
// polls and retries.
func adoptArgs(profile, to string, extra ...string) []string {
	return append([]string{"--adopt", profile, "--to", to, "--lease-ttl", "1s", "--max-poll", "50ms",
		"--retry-base", "20ms", "--retry-cap", "100ms", "--batch-size", "50"}, extra...)
}

// statusCount counts profile's rows in status value v.
func statusCount(t *testing.T, db *testdb.DB, profile, v string) int {
	s := seedTable[profile]
	return db.Count(t, testdb.Placeholder(db.Dialect, "SELECT count(*) FROM "+s.table+" WHERE "+s.status+" = ?"), v)
}

// TestAdoptSeedTables: each seed table, created from its DDL on every
// database, rows written the way its article writes them, drained by
// `outbox relay --adopt`: every row arrives (Spring's tag as a header),
// ends in the table's sent status with its retry counter untouched, and
// a row with an empty topic ends in the table's dead state.
func TestAdoptSeedTables(t *testing.T) {
	for _, d := range testdb.Dialects {
		for _, profile := range []string{"laravel", "spring", "codes"} {
			t.Run(string(d)+"/"+profile, func(t *testing.T) {
				db := testdb.New(t, d)
				createSeed(t, db, profile)
				const n = 40
				for i := range n {
					insertSeed(t, db, profile, i, 5, "order.created")
				}
				insertSeed(t, db, profile, n, 5, "")
				h, url := newHooks(t, profile == "spring", nil)
				p := relaytest.StartRelay(t, db.URL, adoptArgs(profile, url)...)
				s := seedTable[profile]
				relaytest.WaitFor(t, 30*time.Second, "every row sent", func() bool { return statusCount(t, db, profile, s.sent) == n })
				dead := map[string]string{
					"laravel": "SELECT count(*) FROM local_messages WHERE status = 'failed' AND retry_times >= max_retry_times AND topic = ''",
					"spring":  "SELECT count(*) FROM t_local_message WHERE status = 'FAILED' AND retry_count >= max_retry AND topic = '' AND error_msg LIKE '%topic%'",
					"codes":   "SELECT count(*) FROM local_message WHERE status = 2 AND retry_count >= 10 AND topic = ''",
				}[profile]
				relaytest.WaitFor(t, 10*time.Second, "the row without a topic dead", func() bool { return db.Count(t, dead) == 1 })
				p.Stop(t)
				if got := h.distinct(); got != n {
					t.Errorf("%d distinct messages arrived, want %d", got, n)
				}
				if got := db.Count(t, "SELECT count(*) FROM "+s.table+" WHERE "+s.attempts+" <> 0 AND topic <> ''"); got != 0 {
					t.Errorf("%d delivered rows had their retry counter changed", got)
				}
				if profile == "spring" {
					h.mu.Lock()
					for id, tag := range h.tags {
						if tag != "sync-crm" {
							t.Errorf("message %s arrived with tag %q, want sync-crm", id, tag)
						}
					}
					h.mu.Unlock()
				}
			})
		}
	}
}

// deadSQL counts profile's rows in the table's dead state whose payload
// holds mark, with the reason where the table has an error column.
func deadSQL(d store.Dialect, profile, reason string) string {
	switch profile {
	case "laravel":
		payload := "payload"
		if d == store.Postgres {
			payload = "payload::text"
		}
		return "SELECT count(*) FROM local_messages WHERE status = 'failed' AND retry_times = max_retry_times AND " + payload + " LIKE ?"
	case "spring":
		return "SELECT count(*) FROM t_local_message WHERE status = 'FAILED' AND retry_count = max_retry AND payload LIKE ? AND error_msg LIKE '%" + reason + "%'"
	}
	return "SELECT count(*) FROM local_message WHERE status = 2 AND retry_count = 10 AND msg_content LIKE ?"
}

// TestAdoptRetriesUntilDead: a webhook that always fails some messages
// (500) and takes the others. The failures are the messages' own (the
// route keeps delivering the rest), so each failing row is charged
// retry after retry, in the table's vocabulary, until its retries are
// used up and it is in the table's dead state; the rows delivered are
// sent with their counters untouched.
func TestAdoptRetriesUntilDead(t *testing.T) {
	for _, d := range testdb.Dialects {
		for _, profile := range []string{"laravel", "spring", "codes"} {
			t.Run(string(d)+"/"+profile, func(t *testing.T) {
				t.Parallel()
				db := testdb.New(t, d)
				createSeed(t, db, profile)
				const n = 30
				for i := range n {
					insertSeed(t, db, profile, i, n, "order.created")
				}
				poison := func(body string) bool {
					return strings.Contains(body, `"seq":3}`) || strings.Contains(body, `"seq":13}`)
				}
				h, url := newHooks(t, false, poison)
				p := relaytest.StartRelay(t, db.URL, adoptArgs(profile, url)...)
				s := seedTable[profile]
				relaytest.WaitFor(t, 60*time.Second, "both failing rows dead", func() bool {
					return db.Count(t, testdb.Placeholder(d, deadSQL(d, profile, "500")), `%"seq":%3}`) == 2
				})
				p.Stop(t)
				if got := statusCount(t, db, profile, s.sent); got != n-2 {
					t.Errorf("%d rows sent, want %d", got, n-2)
				}
				if got := db.Count(t, "SELECT count(*) FROM "+s.table+" WHERE "+s.status+" = '"+s.sent+"' AND "+s.attempts+" <> 0"); got != 0 {
					t.Errorf("%d sent rows were charged a retry", got)
				}
				want := map[string]int{"laravel": 3, "spring": 10, "codes": 10}[profile]
				h.mu.Lock()
				defer h.mu.Unlock()
				if h.failed != 2*want {
					t.Errorf("the failing rows were attempted %d times, want %d", h.failed, 2*want)
				}
			})
		}
	}
}

// TestAdoptOutageChargesNothing: the destination answers 503 to
// everything for 4 s, then recovers. The route goes down and the rows
// wait; none is charged a retry or goes dead, and every one is sent
// once the destination is back.
func TestAdoptOutageChargesNothing(t *testing.T) {
	for _, d := range []store.Dialect{store.MySQL, store.Postgres} {
		for _, profile := range []string{"laravel", "spring"} {
			t.Run(string(d)+"/"+profile, func(t *testing.T) {
				t.Parallel()
				db := testdb.New(t, d)
				createSeed(t, db, profile)
				const n = 60
				for i := range n {
					insertSeed(t, db, profile, i, 6, "order.created")
				}
				var start time.Time // of the outage: the first request
				h, url := newHooks(t, profile == "spring", func(string) bool {
					if start.IsZero() {
						start = time.Now()
					}
					return time.Since(start) < 4*time.Second
				})
				p := relaytest.StartRelay(t, db.URL, adoptArgs(profile, url)...)
				s := seedTable[profile]
				relaytest.WaitFor(t, 60*time.Second, "every row sent", func() bool { return statusCount(t, db, profile, s.sent) == n })
				p.Stop(t)
				if got := db.Count(t, "SELECT count(*) FROM "+s.table+" WHERE "+s.attempts+" <> 0"); got != 0 {
					t.Errorf("%d rows were charged a retry for the outage", got)
				}
				h.mu.Lock()
				defer h.mu.Unlock()
				if h.failed == 0 {
					t.Error("the destination refused nothing: no outage was tested")
				}
			})
		}
	}
}
