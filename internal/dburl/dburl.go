// Package dburl opens the databases named by the CLI's --db URLs:
// postgres://…, mysql://user:pass@host:3306/db (MariaDB too),
// sqlite:///abs/path.db and sqlite://relative.db.
package dburl

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite" // registers "sqlite"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/driver"
	"github.com/txoutbox/outbox/driver/outboxpgx"
	"github.com/txoutbox/outbox/driver/outboxsql"
	"github.com/txoutbox/outbox/internal/redact"
	"github.com/txoutbox/outbox/internal/store"
)

// DB is an open database with its outbox driver.
type DB struct {
	Dialect store.Dialect
	// Pool is set for PostgreSQL.
	Pool *pgxpool.Pool
	// SQL is set for MySQL and SQLite.
	SQL *sql.DB
	// PGX is set for PostgreSQL, Std for the others.
	PGX *outboxpgx.Driver
	Std *outboxsql.Driver
	// Pooler is set when the PostgreSQL URL leads to a connection pooler
	// (PgBouncer) rather than to the server: it refused the startup
	// parameter jit, which every PostgreSQL server takes. Session state
	// (LISTEN, session locks, prepared statements) does not survive a
	// transaction there.
	Pooler bool

	once    sync.Once
	backend *store.Backend
}

// Backend is the driver's backend.
func (db *DB) Backend() *store.Backend {
	db.once.Do(func() {
		if db.PGX != nil {
			db.backend = store.NewBackend(db.PGX)
		} else {
			db.backend = store.NewBackend(db.Std)
		}
	})
	return db.backend
}

// Close closes the handles.
func (db *DB) Close() {
	if db.Pool != nil {
		db.Pool.Close()
	}
	if db.Std != nil {
		_ = db.Std.Close()
	}
	if db.SQL != nil {
		_ = db.SQL.Close()
	}
}

// Redact returns raw with any password replaced, for messages.
func Redact(raw string) string { return redact.URL(raw) }

// ErrBadURL wraps every URL validation error.
var ErrBadURL = errors.New("bad database URL")

// Parse checks raw and returns its dialect and the driver-level DSN.
func Parse(raw string) (store.Dialect, string, error) {
	return parse(raw, isolationVar)
}

// parse is Parse with isoVar the session variable a mysql:// URL's DSN
// sets the isolation level with.
func parse(raw, isoVar string) (store.Dialect, string, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "", "", fmt.Errorf("%w %q: want postgres://, mysql:// or sqlite://", ErrBadURL, Redact(raw))
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		if _, err := pgxpool.ParseConfig(raw); err != nil {
			return "", "", fmt.Errorf("%w %q: %v", ErrBadURL, Redact(raw), redactErr(err, raw))
		}
		return store.Postgres, raw, nil
	case "mysql", "mariadb":
		u, err := url.Parse(raw)
		if err != nil {
			return "", "", fmt.Errorf("%w %q: %v", ErrBadURL, Redact(raw), redactErr(err, raw))
		}
		cfg := mysql.NewConfig()
		if u.User != nil {
			cfg.User = u.User.Username()
			cfg.Passwd, _ = u.User.Password()
		}
		cfg.Net = "tcp"
		cfg.Addr = u.Host
		if u.Port() == "" {
			cfg.Addr = u.Hostname() + ":3306"
		}
		cfg.DBName = strings.TrimPrefix(u.Path, "/")
		if cfg.DBName == "" {
			return "", "", fmt.Errorf("%w %q: no database name", ErrBadURL, Redact(raw))
		}
		cfg.ParseTime = true
		dsn, err := mysqlParams(cfg.FormatDSN(), u.Query(), isoVar)
		if err != nil {
			return "", "", fmt.Errorf("%w %q: %v", ErrBadURL, Redact(raw), err)
		}
		return store.MySQL, dsn, nil
	case "sqlite", "sqlite3", "file":
		path := rest
		if q := strings.IndexByte(path, '?'); q >= 0 {
			path = path[:q]
		}
		if path == "" || path == "/" {
			return "", "", fmt.Errorf("%w %q: no file path", ErrBadURL, raw)
		}
		return store.SQLite, "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate", nil
	}
	return "", "", fmt.Errorf("%w %q: unknown scheme %q (want postgres, mysql or sqlite)", ErrBadURL, Redact(raw), scheme)
}

// MySQLParams are the query parameters a mysql:// URL may carry, with the
// values each takes ("" for any). The driver would run any other name as
// "SET name=value" on every connection, or act on it (allowAllFiles
// enables LOAD DATA LOCAL INFILE of any file), so the rest are refused.
// transaction_isolation (MySQL 8, MariaDB 11.1 and later) and
// tx_isolation (MariaDB before 11.1, MySQL 5.7) are session variables the
// driver sets on every new connection; a value is one of the four levels,
// quoted or not.
var MySQLParams = map[string][]string{
	"tls":                   {"true", "false", "preferred"},
	"timeout":               nil,
	"readTimeout":           nil,
	"writeTimeout":          nil,
	"charset":               nil,
	"collation":             nil,
	"loc":                   nil,
	"maxAllowedPacket":      nil,
	"rejectReadOnly":        {"true", "false"},
	"interpolateParams":     {"true", "false"},
	"transaction_isolation": isolationLevels,
	"tx_isolation":          isolationLevels,
}

// isolationLevels are the values of the isolation session variables.
var isolationLevels = []string{"READ-UNCOMMITTED", "READ-COMMITTED", "REPEATABLE-READ", "SERIALIZABLE"}

// The session variable that holds a connection's isolation level: MySQL
// 8.0 removed tx_isolation, and MariaDB before 11.1 knows only
// tx_isolation. A mysql:// URL's DSN sets isolationVar; Open falls back to
// oldIsolationVar on a server that does not know it.
const (
	isolationVar    = "transaction_isolation"
	oldIsolationVar = "tx_isolation"
)

// mysqlDefaults adds to dsn what the outbox wants of a MySQL connection,
// unless the URL's query q chose otherwise:
//
//   - interpolateParams=true: the driver sends a statement with its
//     arguments in one round trip, where a prepared statement takes
//     three (prepare, execute, close).
//   - READ COMMITTED, set by the session variable isoVar on every new
//     connection. Under InnoDB's default REPEATABLE READ the relay's lease
//     renewal and settle take gap and next-key locks, on which two relays
//     wait for each other and deadlock; the outbox's statements fence
//     with their own conditions and need no snapshot across statements.
//     An empty isoVar leaves the server's level (Open's choice on a
//     server that logs statements, where InnoDB refuses writes at READ
//     COMMITTED).
func mysqlDefaults(dsn string, q url.Values, isoVar string) string {
	if !q.Has("interpolateParams") && !slices.Contains(unsafeCharsets, strings.ToLower(q.Get("charset"))) {
		dsn += "&interpolateParams=true"
	}
	if isoVar != "" && !q.Has(isolationVar) && !q.Has(oldIsolationVar) {
		dsn += "&" + isoVar + "=" + url.QueryEscape("'READ-COMMITTED'")
	}
	return dsn
}

// unsafeCharsets are the character sets in which the driver's escaping
// of interpolated arguments is not safe: a multi-byte character there may
// end in the backslash byte. The driver refuses interpolateParams with
// their collations; with the charset parameter alone it would not notice.
var unsafeCharsets = []string{"big5", "cp932", "gb18030", "gb2312", "gbk", "sjis"}

// mysqlParams adds the URL's query parameters and then mysqlDefaults to a
// driver DSN that has none but parseTime, refusing names outside
// MySQLParams.
func mysqlParams(dsn string, q url.Values, isoVar string) (string, error) {
	names := make([]string, 0, len(q))
	for k := range q {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		allowed, ok := MySQLParams[k]
		if !ok {
			return "", fmt.Errorf("query parameter %q is not allowed (allowed: %s)", k, strings.Join(slices.Sorted(maps.Keys(MySQLParams)), ", "))
		}
		v := q.Get(k)
		isolation := k == isolationVar || k == oldIsolationVar
		if isolation {
			v = strings.ToUpper(strings.Trim(v, "'"))
		}
		if allowed != nil && !slices.Contains(allowed, v) {
			return "", fmt.Errorf("query parameter %s=%q: want %s", k, q.Get(k), strings.Join(allowed, ", "))
		}
		if isolation {
			// The driver sends "SET name = value" as written: a level is
			// a string there.
			v = "'" + v + "'"
		}
		if len(q[k]) > 1 {
			return "", fmt.Errorf("query parameter %q is given %d times", k, len(q[k]))
		}
		sep := "&"
		if !strings.Contains(dsn, "?") {
			sep = "?"
		}
		dsn += sep + k + "=" + url.QueryEscape(v)
	}
	dsn = mysqlDefaults(dsn, q, isoVar)
	if _, err := mysql.ParseDSN(dsn); err != nil {
		return "", err
	}
	return dsn, nil
}

// redactErr strips the URL from a driver error that echoes it.
func redactErr(err error, raw string) string {
	return strings.ReplaceAll(err.Error(), raw, Redact(raw))
}

// Limits bound what an open database may hold, for a process that serves
// many: the zero Limits leaves each dialect's defaults.
type Limits struct {
	// MaxConns is the most connections the pool opens (PostgreSQL,
	// MySQL; SQLite keeps one).
	MaxConns int
	// IdleTime closes a connection unused for this long.
	IdleTime time.Duration
	// AppName is the PostgreSQL application_name of the connections,
	// unless the URL sets one: what pg_stat_activity shows.
	AppName string
	// Listeners, when set, shares one LISTEN connection between the
	// PostgreSQL databases opened with it that reach the same database
	// of the same server as the same user (schemas of one database).
	Listeners *Listeners
}

// Listeners hands out one outboxpgx.SharedListener per PostgreSQL
// server, database and user. The zero Listeners is ready to use.
type Listeners struct {
	mu sync.Mutex
	m  map[string]*outboxpgx.SharedListener
}

// of is the shared listener for the connections cfg opens.
func (ls *Listeners) of(cfg *pgconn.Config) *outboxpgx.SharedListener {
	sum := sha256.Sum256([]byte(cfg.Password))
	key := fmt.Sprintf("%s\x00%d\x00%s\x00%s\x00%x\x00%t", cfg.Host, cfg.Port, cfg.Database, cfg.User, sum, cfg.TLSConfig != nil)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.m == nil {
		ls.m = make(map[string]*outboxpgx.SharedListener)
	}
	l := ls.m[key]
	if l == nil {
		l = &outboxpgx.SharedListener{}
		ls.m[key] = l
	}
	return l
}

// Open opens raw and checks the connection.
func Open(ctx context.Context, raw string) (*DB, error) {
	return OpenLimited(ctx, raw, Limits{})
}

// OpenLimited opens raw within lim and checks the connection.
func OpenLimited(ctx context.Context, raw string, lim Limits) (*DB, error) {
	d, dsn, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	db := &DB{Dialect: d}
	switch d {
	case store.Postgres:
		db.Pool, db.Pooler, err = openPostgres(ctx, dsn, lim)
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %s", Redact(raw), redactErr(err, raw))
		}
		var cfg outboxpgx.Config
		if lim.Listeners != nil {
			cfg.Listener = lim.Listeners.of(&db.Pool.Config().ConnConfig.Config)
		}
		db.PGX, err = outboxpgx.New(db.Pool, &cfg)
		if err != nil {
			db.Close()
			return nil, err
		}
	default:
		if db, err = openStd(d, dsn, lim); err != nil {
			return nil, err
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = db.ping(pctx)
	if d == store.MySQL && unknownVariable(err, isolationVar) {
		// MariaDB before 11.1 (and MySQL before 5.7.20) know the
		// isolation level by its old name only.
		if _, old, perr := parse(raw, oldIsolationVar); perr == nil && old != dsn {
			db.Close()
			if db, err = openStd(d, old, lim); err != nil {
				return nil, err
			}
			dsn = old
			err = db.ping(pctx)
		}
	}
	if d == store.MySQL && err == nil {
		// InnoDB refuses writes at READ COMMITTED when the binary log
		// records statements: there the server's level stays.
		if _, plain, perr := parse(raw, ""); perr == nil && plain != dsn && statementBinlog(pctx, db.SQL) {
			db.Close()
			if db, err = openStd(d, plain, lim); err != nil {
				return nil, err
			}
			err = db.ping(pctx)
		}
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to %s: %s", Redact(raw), redactErr(err, raw))
	}
	return db, nil
}

// openStd opens a database/sql pool over dsn (MySQL or SQLite) within lim,
// with its outbox driver.
func openStd(d store.Dialect, dsn string, lim Limits) (*DB, error) {
	name := "mysql"
	if d == store.SQLite {
		name = "sqlite"
	}
	sqlDB, err := sql.Open(name, dsn)
	if err != nil {
		return nil, err
	}
	db := &DB{Dialect: d, SQL: sqlDB}
	if d == store.SQLite {
		// One writer at a time anyway: queueing in the pool is cheaper
		// than SQLite's busy-wait sleeps.
		db.SQL.SetMaxOpenConns(1)
	}
	if d == store.MySQL {
		db.SQL.SetMaxOpenConns(16)
		db.SQL.SetMaxIdleConns(16)
		db.SQL.SetConnMaxLifetime(time.Hour)
		if lim.MaxConns > 0 {
			db.SQL.SetMaxOpenConns(lim.MaxConns)
			db.SQL.SetMaxIdleConns(lim.MaxConns)
		}
	}
	if lim.IdleTime > 0 {
		db.SQL.SetConnMaxIdleTime(lim.IdleTime)
	}
	db.Std, err = outboxsql.New(db.SQL, &outboxsql.Config{Dialect: driver.Dialect(d)})
	if err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// statementBinlog reports whether the server writes a binary log in
// statement format (binlog_format=STATEMENT), where InnoDB refuses writes
// at READ COMMITTED (ER_BINLOG_STMT_MODE_AND_ROW_ENGINE).
func statementBinlog(ctx context.Context, db *sql.DB) bool {
	var logBin int
	var format string
	err := db.QueryRowContext(ctx, "SELECT @@log_bin, @@binlog_format").Scan(&logBin, &format)
	return err == nil && logBin == 1 && strings.EqualFold(format, "STATEMENT")
}

// unknownVariable reports whether err is the MySQL server refusing to set
// the system variable name (ER_UNKNOWN_SYSTEM_VARIABLE).
func unknownVariable(err error, name string) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1193 && strings.Contains(me.Message, "'"+name+"'")
}

// openPostgres opens a pool over dsn with jit off for its connections
// (unless dsn sets jit) and checks a connection. A pooler refuses the
// parameter (PgBouncer: "unsupported startup parameter: jit"); then the
// pool is opened again without it, and, unless dsn chooses a query mode,
// with statements described and run unnamed (pgx's cache_describe): a
// named prepared statement lives on one server connection, which a pooler
// in transaction mode hands to another client after each transaction.
// The relay's read and settle functions turn jit off themselves, so
// nothing the relay runs often depends on the connection's setting.
func openPostgres(ctx context.Context, dsn string, lim Limits) (pool *pgxpool.Pool, pooler bool, err error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, false, err
	}
	if cfg.MaxConns < 8 {
		cfg.MaxConns = 8
	}
	if lim.MaxConns > 0 && !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = int32(min(lim.MaxConns, 1<<20))
	}
	if lim.IdleTime > 0 {
		cfg.MaxConnIdleTime = lim.IdleTime
		cfg.HealthCheckPeriod = min(cfg.HealthCheckPeriod, lim.IdleTime)
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok && lim.AppName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = lim.AppName
	}
	// The relay's read is estimated expensive whenever the statistics
	// last saw a backlog, and JIT-compiling it then costs more (7–9 ms)
	// than running it; nothing the outbox runs gains from JIT.
	_, userJIT := cfg.ConnConfig.RuntimeParams["jit"]
	if !userJIT {
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	pool, err = pingedPool(ctx, cfg)
	if err == nil || userJIT || !RefusedStartupParameter(err) {
		return pool, false, err
	}
	delete(cfg.ConnConfig.RuntimeParams, "jit")
	if !strings.Contains(dsn, "default_query_exec_mode") {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	}
	pool, err = pingedPool(ctx, cfg)
	return pool, err == nil, err
}

// pingedPool opens a pool over cfg and checks one connection (10 s at
// most).
func pingedPool(ctx context.Context, cfg *pgxpool.Config) (*pgxpool.Pool, error) {
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// RefusedStartupParameter reports whether err is a pooler refusing a
// connection's startup parameter (PgBouncer: "unsupported startup
// parameter: NAME"; its ignore_startup_parameters lets such parameters
// through).
func RefusedStartupParameter(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && strings.Contains(pe.Message, "unsupported startup parameter")
}

func (db *DB) ping(ctx context.Context) error {
	if db.Pool != nil {
		return db.Pool.Ping(ctx)
	}
	return db.SQL.PingContext(ctx)
}

// DriverLogs sends the MySQL driver's own log lines (it prints one per
// failed connection attempt, several a second while the database is
// unreachable) to l at debug level, from then on. Before the first call
// they go to stderr, as the driver's own logger does.
func DriverLogs(l *slog.Logger) { driverLog.Store(l) }

// driverLog receives the MySQL driver's lines. The driver's logger is one
// variable for the whole process, read whenever a connection is
// configured: it is set once, before any goroutine can read it, and
// forwards to whatever logger DriverLogs last stored.
var driverLog atomic.Pointer[slog.Logger]

func init() {
	_ = mysql.SetLogger(mysqlLogger{fallback: log.New(os.Stderr, "[mysql] ", log.LstdFlags)})
}

type mysqlLogger struct{ fallback *log.Logger }

func (m mysqlLogger) Print(v ...any) {
	if l := driverLog.Load(); l != nil {
		l.Debug("mysql driver: " + fmt.Sprint(v...))
		return
	}
	m.fallback.Print(v...)
}

// NewRelay builds a relay over the database's driver: pgx on PostgreSQL,
// database/sql on the others.
func (db *DB) NewRelay(cfg *outbox.RelayConfig) (*outbox.Relay, error) {
	if db.PGX != nil {
		return outbox.NewRelay(db.PGX, cfg)
	}
	return outbox.NewRelay(db.Std, cfg)
}

// Migrate applies the schema's pending migrations through the database's
// driver (see outbox.Migrate).
func (db *DB) Migrate(ctx context.Context, opts *outbox.MigrateOpts) ([]int, error) {
	if db.PGX != nil {
		return outbox.Migrate(ctx, db.PGX, opts)
	}
	return outbox.Migrate(ctx, db.Std, opts)
}

// NewFleet builds a fleet member whose coordination database is this one.
func (db *DB) NewFleet(cfg *outbox.FleetConfig) (*outbox.Fleet, error) {
	if db.PGX != nil {
		return outbox.NewFleet(db.PGX, cfg)
	}
	return outbox.NewFleet(db.Std, cfg)
}

// FleetDriver is the database's driver for a fleet's list.
func (db *DB) FleetDriver() (outbox.FleetDriver, error) {
	if db.PGX != nil {
		return outbox.FleetDriverOf(db.PGX)
	}
	return outbox.FleetDriverOf(db.Std)
}
