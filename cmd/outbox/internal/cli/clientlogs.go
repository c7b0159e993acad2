package cli

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/txoutbox/outbox/internal/dburl"
)

// clientLog receives a broker client's own log lines (go-redis logs every
// failed dial) at debug level, so an outage shows as the relay's single
// "route down" line instead of a flood on stderr. The client's logger is
// one variable for the whole process: it is set once, before any
// goroutine reads it, and forwards to the logger last stored here.
var clientLog atomic.Pointer[slog.Logger]

func init() {
	redis.SetLogger(clientLogger{fallback: log.New(os.Stderr, "redis: ", log.LstdFlags|log.Lshortfile)})
}

type clientLogger struct{ fallback *log.Logger }

func (c clientLogger) Printf(ctx context.Context, format string, v ...any) {
	if l := clientLog.Load(); l != nil {
		l.DebugContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
		return
	}
	_ = c.fallback.Output(2, fmt.Sprintf(format, v...))
}

// routeClientLogs sends the broker clients' and the MySQL driver's own
// lines to l.
func routeClientLogs(l *slog.Logger) {
	clientLog.Store(l)
	dburl.DriverLogs(l)
}
