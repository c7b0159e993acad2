// Package adopttest holds the local message tables of the seed articles,
// for the tests of outbox relay --adopt: their DDL on every database and
// their rows written the way the articles' code writes them.
package adopttest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// Tables are the local message tables of the seed articles: the
// MySQL DDL as the articles print it, and its PostgreSQL and SQLite
// equivalents. The Laravel guide's DDL lacks the primary key its
// AUTO_INCREMENT column needs (MySQL refuses it without one; Laravel's
// own migrations always add it), so it has the key added.
var Tables = map[string]map[store.Dialect]string{
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

// Table is each profile's table and the status its delivered rows end in.
var Table = map[string]struct{ Name, Status, Sent, Attempts string }{
	"laravel": {"local_messages", "status", "sent", "retry_times"},
	"spring":  {"t_local_message", "status", "SENT", "retry_count"},
	"codes":   {"local_message", "status", "1", "retry_count"},
}

// nowSQL is the current time as the applications' statements write it.
func NowSQL(d store.Dialect) string {
	switch d {
	case store.MySQL:
		return "NOW()"
	case store.SQLite:
		return "datetime('now')"
	}
	return "LOCALTIMESTAMP(0)"
}

// Create creates profile's table in db from its DDL.
func Create(t *testing.T, db *testdb.DB, profile string) {
	t.Helper()
	for stmt := range strings.SplitSeq(Tables[profile][db.Dialect], ";\n") {
		db.Exec(t, stmt)
	}
}

// Insert writes row seq of profile's table the way its article's
// code does: Laravel's LocalMessage::create (topic, payload,
// max_retry_times and Eloquent's timestamps), Spring's mapper insert of a
// full LocalMessage (a UUID message id, tag, business key, PENDING, the
// retry fields, next_retry_time now), the design note's insert with
// status 0. Keys spread rows over keys keys; payload is
// {"k":key,"seq":seq}, which relaytest.KeyOrder reads.
func Insert(t *testing.T, db *testdb.DB, profile string, seq, keys int, topic string) {
	t.Helper()
	k := seq % keys
	payload := fmt.Sprintf(`{"k":%d,"seq":%d}`, k, seq)
	now := NowSQL(db.Dialect)
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
