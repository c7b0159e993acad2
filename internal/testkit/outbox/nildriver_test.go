package outbox_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/driver/outboxpgx"
	"github.com/txoutbox/outbox/driver/outboxsql"
)

// TestNilDriver: every entry point refuses a nil driver, as a nil
// interface or as a nil pointer in one, with an error naming the call,
// instead of panicking later.
func TestNilDriver(t *testing.T) {
	ctx := context.Background()
	var pgx *outboxpgx.Driver
	var std *outboxsql.Driver
	routes := &outbox.RelayConfig{Routes: []outbox.Route{{Pattern: "*", Publisher: outbox.PublisherFunc(func(context.Context, *outbox.Envelope) error { return nil })}}}
	for name, call := range map[string]func() error{
		"NewRelay":      func() error { _, err := outbox.NewRelay(pgx, routes); return err },
		"NewProducer":   func() error { _, err := outbox.NewProducer(std, nil); return err },
		"Migrate":       func() error { _, err := outbox.Migrate(ctx, pgx, nil); return err },
		"MarkConsumed":  func() error { return outbox.MarkConsumed(ctx, std, "0190a0a0-0000-7000-8000-00000000002a") },
		"NewRelay(nil)": func() error { _, err := outbox.NewRelay[*sql.Tx](nil, routes); return err },
	} {
		err := call()
		if err == nil || !strings.Contains(err.Error(), "nil driver") || !strings.Contains(err.Error(), strings.TrimSuffix(name, "(nil)")) {
			t.Errorf("%s with a nil driver: %v, want an error naming the call and the nil driver", name, err)
		}
	}
}
