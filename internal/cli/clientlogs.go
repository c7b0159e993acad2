package cli

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/txoutbox/outbox/internal/dburl"
)

// clientLogger sends a broker client's own log lines (go-redis logs every
// failed dial) to the relay's logger at debug level, so an outage shows as
// the relay's single "route paused" line instead of a flood on stderr. The
// MySQL driver's lines go the same way.
type clientLogger struct{ l *slog.Logger }

func (c clientLogger) Printf(ctx context.Context, format string, v ...any) {
	c.l.DebugContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}

func routeClientLogs(l *slog.Logger) {
	redis.SetLogger(clientLogger{l})
	dburl.DriverLogs(l)
}
