// Package outboxbinlog wakes relays on MySQL and MariaDB when a producer
// commits, whatever it writes with: it follows the server's binary log
// as a replica does and tells the relay when a transaction that inserted
// into the outbox table (or the adopted table) committed. It is a
// driver.ChangeFeed: give it to the relay as RelayConfig.ChangeFeed.
//
// Without it an idle relay on MySQL or MariaDB probes the table's highest
// id every ProbeInterval (25 ms): about 3 % of a core for the relay and
// 2 % for the server on a quiet machine. Following the binary log, the
// relay probes only when a producer committed (at most every
// ProbeInterval) and once a second, and a row is found within a few
// milliseconds of its commit.
//
// The server must write a binary log (log_bin, on by default in MySQL 8,
// off by default in MariaDB) and the account needs the REPLICATION SLAVE
// privilege, and to read the log's position REPLICATION CLIENT (MySQL) or
// BINLOG MONITOR (MariaDB 10.5 and later):
//
//	GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'outbox'@'%';
//
// Where the server writes none, or the account may not read it, Watch
// fails with the reason and the relay probes instead, trying the feed
// again later. The feeds of one server and account share one replication
// connection: a relay over many databases of a server reads its log once. The feed reads the whole binary log, as a replica's I/O
// thread does: on a server that writes much to other tables, that is
// network and CPU the relay spends (it decodes only the events' headers).
package outboxbinlog

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// Config is where the binary log is read.
type Config struct {
	// Addr is the server's host:port (port 3306 when left out).
	Addr string
	// User and Password are the account's; it needs REPLICATION SLAVE and
	// REPLICATION CLIENT or BINLOG MONITOR (see the package doc).
	User, Password string
	// Database is the schema whose table the relay serves; empty: a
	// table of that name in any schema.
	Database string
	// TLS, when set, is the connection's TLS configuration.
	TLS *tls.Config
	// ServerID is the replica id the feed registers with; it must differ
	// from the server's and from every other replica's. Defaults to a
	// random one.
	ServerID uint32
	// Heartbeat is how often the server sends a heartbeat while nothing
	// is written; a feed that hears nothing for three of them is lost.
	// Defaults to 10 s.
	Heartbeat time.Duration
	// Logger receives the replication client's own messages. Defaults to
	// none.
	Logger *slog.Logger
}

// Feed follows a MySQL or MariaDB server's binary log for a relay.
type Feed struct {
	cfg Config
}

// New returns a feed reading the binary log where cfg says.
func New(cfg Config) (*Feed, error) {
	if cfg.Addr == "" {
		return nil, errors.New("outboxbinlog: Config.Addr is empty")
	}
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		cfg.Addr = net.JoinHostPort(cfg.Addr, "3306")
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Feed{cfg: cfg}, nil
}

// OpenURL returns a feed for a mysql:// (or mariadb://) URL as the
// outbox command takes it: mysql://USER:PASSWORD@HOST:PORT/DATABASE, with
// tls=true (verified), tls=preferred or tls=skip-verify (not verified;
// the feed then needs a server that speaks TLS) or tls=false among its
// options; other options are ignored.
func OpenURL(raw string) (*Feed, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("outboxbinlog: a mysql:// URL: %w", redacted(err))
	}
	if u.Scheme != "mysql" && u.Scheme != "mariadb" {
		return nil, fmt.Errorf("outboxbinlog: want a mysql:// or mariadb:// URL, not %s://", u.Scheme)
	}
	if u.Host == "" {
		return nil, errors.New("outboxbinlog: the URL names no host")
	}
	cfg := Config{Addr: u.Host, User: u.User.Username(), Database: strings.TrimPrefix(u.Path, "/")}
	cfg.Password, _ = u.User.Password()
	switch v := u.Query().Get("tls"); v {
	case "", "false", "0":
	case "true", "1":
		cfg.TLS = &tls.Config{ServerName: u.Hostname()}
	case "skip-verify", "preferred":
		cfg.TLS = &tls.Config{InsecureSkipVerify: true}
	default:
		return nil, fmt.Errorf("outboxbinlog: tls=%q: want true, preferred, skip-verify or false", v)
	}
	return New(cfg)
}

// redacted is a URL parse error without the URL, which may hold a
// password.
func redacted(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// String names the feed in the relay's wake-up ("binlog").
func (f *Feed) String() string { return "binlog" }

// Watch follows the binary log from its current end until ctx is done
// or the connection is lost (driver.ChangeFeed): it calls changed once
// when it follows, then at the commit of every transaction that
// inserted rows into table (a row event of the table's, or, as a
// statement, an INSERT, REPLACE or LOAD DATA naming it). The Watch calls
// of feeds of one server and account share one replication connection
// (a relay over many databases of a server reads its log once).
func (f *Feed) Watch(ctx context.Context, table string, changed func()) error {
	w := &watcher{schema: f.cfg.Database, table: strings.ToLower(table), changed: changed}
	s := f.join(w)
	defer s.leave(w)
	select {
	case <-ctx.Done():
		return nil
	case <-s.ready:
		changed()
	case <-s.done:
		return s.err
	}
	select {
	case <-ctx.Done():
		return nil
	case <-s.done:
		return s.err
	}
}

// streams are the replication connections in use, one per server and
// account, each with the Watch calls it serves.
var (
	streamsMu sync.Mutex
	streams   = map[streamKey]*stream{}
)

type streamKey struct {
	addr, user, password string
	tls                  bool
}

// stream is one replication connection and the watchers it serves.
type stream struct {
	key    streamKey
	cancel context.CancelFunc
	// ready is closed once it follows the log, done when it ended (err
	// says why).
	ready, done chan struct{}
	err         error

	mu sync.Mutex
	m  matcher
}

// join adds w to the stream of f's server and account, starting one
// when there is none.
func (f *Feed) join(w *watcher) *stream {
	key := streamKey{f.cfg.Addr, f.cfg.User, f.cfg.Password, f.cfg.TLS != nil}
	streamsMu.Lock()
	defer streamsMu.Unlock()
	s := streams[key]
	if s == nil {
		ctx, cancel := context.WithCancel(context.Background())
		s = &stream{key: key, cancel: cancel, ready: make(chan struct{}), done: make(chan struct{})}
		streams[key] = s
		go s.run(ctx, f)
	}
	s.mu.Lock()
	s.m.add(w)
	s.mu.Unlock()
	return s
}

// leave removes w; the stream stops once it serves none.
func (s *stream) leave(w *watcher) {
	streamsMu.Lock()
	defer streamsMu.Unlock()
	s.mu.Lock()
	s.m.remove(w)
	empty := len(s.m.watchers) == 0
	s.mu.Unlock()
	if empty {
		s.cancel()
		if streams[s.key] == s {
			delete(streams, s.key)
		}
	}
}

// run follows the log until ctx is done or the connection fails, handing
// each event to the watchers' matcher.
func (s *stream) run(ctx context.Context, f *Feed) {
	err := f.follow(ctx, func() { close(s.ready) }, func(ev *replication.BinlogEvent) {
		s.mu.Lock()
		hits := s.m.event(ev)
		s.mu.Unlock()
		for _, w := range hits {
			w.changed()
		}
	})
	streamsMu.Lock()
	if streams[s.key] == s {
		delete(streams, s.key)
	}
	streamsMu.Unlock()
	if err == nil {
		err = errors.New("outboxbinlog: the binary log's reader stopped")
	}
	s.err = err
	close(s.done)
}

// follow reads the binary log from its current end until ctx is done
// (nil) or the connection fails, calling ready once it follows and event
// for every event.
func (f *Feed) follow(ctx context.Context, ready func(), event func(*replication.BinlogEvent)) error {
	pos, flavor, serverID, err := f.position(ctx)
	if err != nil {
		return err
	}
	id := f.cfg.ServerID
	for id == 0 || id == serverID {
		id = randomID()
	}
	host, port, err := net.SplitHostPort(f.cfg.Addr)
	if err != nil {
		return fmt.Errorf("outboxbinlog: address %q: %w", f.cfg.Addr, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return fmt.Errorf("outboxbinlog: port %q: %w", port, err)
	}
	syncer := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID:         id,
		Flavor:           flavor,
		Host:             host,
		Port:             uint16(p),
		User:             f.cfg.User,
		Password:         f.cfg.Password,
		TLSConfig:        f.cfg.TLS,
		HeartbeatPeriod:  f.cfg.Heartbeat,
		ReadTimeout:      3 * f.cfg.Heartbeat,
		DisableRetrySync: true,
		Logger:           f.cfg.Logger,
		// Only the rows events' headers (their table) are read.
		RowsEventDecodeFunc: func(e *replication.RowsEvent, data []byte) error {
			_, err := e.DecodeHeader(data)
			return err
		},
	})
	defer syncer.Close()
	stream, err := syncer.StartSync(pos)
	if err != nil {
		return fmt.Errorf("outboxbinlog: start reading the binary log at %s: %w", pos, err)
	}
	first := true
	for {
		ev, err := stream.GetEvent(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("outboxbinlog: reading the binary log: %w", err)
		}
		if first {
			// The first event (the server's format description) says the
			// dump runs.
			first = false
			ready()
		}
		event(ev)
	}
}

// position connects to the server and returns where its binary log ends,
// its flavor for the replication client and its server id.
func (f *Feed) position(ctx context.Context) (mysql.Position, string, uint32, error) {
	var opts []client.Option
	if f.cfg.TLS != nil {
		opts = append(opts, func(c *client.Conn) error { c.SetTLSConfig(f.cfg.TLS); return nil })
	}
	c, err := client.ConnectWithContext(ctx, f.cfg.Addr, f.cfg.User, f.cfg.Password, "", 10*time.Second, opts...)
	if err != nil {
		return mysql.Position{}, "", 0, fmt.Errorf("outboxbinlog: connect to %s: %w", f.cfg.Addr, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	r, err := c.Execute("SELECT VERSION(), @@server_id, @@log_bin")
	if err != nil {
		return mysql.Position{}, "", 0, fmt.Errorf("outboxbinlog: %w", err)
	}
	version, _ := r.GetString(0, 0)
	sid, _ := r.GetUint(0, 1)
	logBin, _ := r.GetInt(0, 2)
	if logBin == 0 {
		return mysql.Position{}, "", 0, errors.New("outboxbinlog: the server writes no binary log (log_bin is OFF)")
	}
	flavor := mysql.MySQLFlavor
	if strings.Contains(strings.ToLower(version), "mariadb") {
		flavor = mysql.MariaDBFlavor
	}
	r, err = c.Execute("SHOW MASTER STATUS")
	if err != nil {
		// MySQL 8.4 and later.
		var err2 error
		if r, err2 = c.Execute("SHOW BINARY LOG STATUS"); err2 != nil {
			return mysql.Position{}, "", 0, fmt.Errorf("outboxbinlog: read the binary log's position: %w", err)
		}
	}
	if r.RowNumber() == 0 {
		return mysql.Position{}, "", 0, errors.New("outboxbinlog: read the binary log's position: the server reports none (does the account have REPLICATION CLIENT or BINLOG MONITOR?)")
	}
	file, _ := r.GetString(0, 0)
	off, _ := r.GetUint(0, 1)
	return mysql.Position{Name: file, Pos: uint32(off)}, flavor, uint32(sid), nil
}

func randomID() uint32 {
	var b [4]byte
	_, _ = io.ReadFull(rand.Reader, b[:])
	return binary.LittleEndian.Uint32(b[:])
}

// watcher is one Watch call: the table it follows (lower case), in
// which schema ("" any), and its callback.
type watcher struct {
	schema, table string
	changed       func()
	// hit: the current transaction inserted into the table.
	hit bool
}

// matcher tells, event by event, the commits of transactions that
// inserted into a watcher's table.
type matcher struct {
	// watchers by table, then by schema ("" for those of any schema).
	watchers map[*watcher]struct{}
	byTable  map[string]map[string][]*watcher
	// hits are the watchers the current transaction inserted for; inTx:
	// a COMMIT or XID event will end it.
	hits []*watcher
	inTx bool
}

func (m *matcher) add(w *watcher) {
	if m.watchers == nil {
		m.watchers, m.byTable = map[*watcher]struct{}{}, map[string]map[string][]*watcher{}
	}
	m.watchers[w] = struct{}{}
	if m.byTable[w.table] == nil {
		m.byTable[w.table] = map[string][]*watcher{}
	}
	m.byTable[w.table][w.schema] = append(m.byTable[w.table][w.schema], w)
}

func (m *matcher) remove(w *watcher) {
	delete(m.watchers, w)
	byTable := m.byTable[w.table]
	byTable[w.schema] = slices.DeleteFunc(byTable[w.schema], func(o *watcher) bool { return o == w })
	if len(byTable[w.schema]) == 0 {
		delete(byTable, w.schema)
	}
	if len(byTable) == 0 {
		delete(m.byTable, w.table)
	}
	m.hits = slices.DeleteFunc(m.hits, func(o *watcher) bool { return o == w })
}

// event takes the next event and returns the watchers whose table a
// transaction it commits inserted into.
func (m *matcher) event(ev *replication.BinlogEvent) []*watcher {
	switch e := ev.Event.(type) {
	case *replication.RowsEvent:
		switch ev.Header.EventType {
		case replication.WRITE_ROWS_EVENTv0, replication.WRITE_ROWS_EVENTv1, replication.WRITE_ROWS_EVENTv2,
			replication.MARIADB_WRITE_ROWS_COMPRESSED_EVENT_V1:
			if e.Table != nil {
				byTable := m.byTable[strings.ToLower(string(e.Table.Table))]
				m.hit(byTable[string(e.Table.Schema)])
				m.hit(byTable[""])
			}
		}
	case *replication.MariadbGTIDEvent:
		// A MariaDB transaction starts with its GTID; a standalone one
		// (no COMMIT or XID follows) commits with its statement.
		m.reset()
		m.inTx = !e.IsStandalone()
	case *replication.QueryEvent:
		q := strings.TrimSpace(string(e.Query))
		switch {
		case strings.EqualFold(q, "BEGIN"):
			m.reset()
			m.inTx = true
		case strings.EqualFold(q, "COMMIT"):
			return m.commit()
		default:
			m.statement(string(e.Schema), q)
			if !m.inTx {
				return m.commit()
			}
		}
	case *replication.XIDEvent:
		return m.commit()
	}
	return nil
}

// hit records that the current transaction inserted for ws.
func (m *matcher) hit(ws []*watcher) {
	for _, w := range ws {
		if !w.hit {
			w.hit = true
			m.hits = append(m.hits, w)
		}
	}
}

func (m *matcher) reset() {
	for _, w := range m.hits {
		w.hit = false
	}
	m.hits = m.hits[:0]
	m.inTx = false
}

// commit returns the watchers the ending transaction inserted for.
func (m *matcher) commit() []*watcher {
	if len(m.hits) == 0 {
		m.inTx = false
		return nil
	}
	out := slices.Clone(m.hits)
	m.reset()
	return out
}

// statement records the watchers statement q, run in schema, may insert
// for: an INSERT, REPLACE or LOAD DATA that names their table, run in
// their schema or naming it (a statement's text does not say surely
// which schema a table is in; a wrong guess costs a probe).
func (m *matcher) statement(schema, q string) {
	q = strings.TrimLeft(q, " \t\r\n(")
	for strings.HasPrefix(q, "/*") {
		end := strings.Index(q, "*/")
		if end < 0 {
			return
		}
		q = strings.TrimLeft(q[end+2:], " \t\r\n(")
	}
	if len(q) < 7 {
		return
	}
	verb := strings.ToUpper(q[:7])
	if !strings.HasPrefix(verb, "INSERT") && !strings.HasPrefix(verb, "REPLACE") && !strings.HasPrefix(verb, "LOAD") {
		return
	}
	lower := strings.ToLower(q)
	for table, bySchema := range m.byTable {
		if !strings.Contains(lower, table) {
			continue
		}
		for s, ws := range bySchema {
			if s == "" || s == schema || strings.Contains(lower, strings.ToLower(s)) {
				m.hit(ws)
			}
		}
	}
}
