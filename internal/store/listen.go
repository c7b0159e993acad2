package store

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// ListenPGX listens on NotifyChannel over conn and calls wake for every
// notification until ctx is done or the connection fails.
func ListenPGX(ctx context.Context, conn *pgx.Conn, wake func()) error {
	if _, err := conn.Exec(ctx, "LISTEN "+NotifyChannel); err != nil {
		return err
	}
	// Messages committed before LISTEN took effect are found by this read.
	wake()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		wake()
	}
}
