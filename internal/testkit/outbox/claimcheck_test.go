package outbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestClaimCheckConfig: bad claim-check settings of a producer or a
// relay are refused with one line naming the field; payloads over the
// claim-check limit are refused before anything is written.
func TestClaimCheckConfig(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	dir, err := claimcheck.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cfg  outbox.ClaimCheckConfig
		want string
	}{
		{outbox.ClaimCheckConfig{}, "outbox: Config.ClaimCheck.Store is required"},
		{outbox.ClaimCheckConfig{Store: dir, Threshold: -1}, "outbox: Config.ClaimCheck.Threshold must not be negative"},
		{outbox.ClaimCheckConfig{Store: dir, MaxPayloadBytes: -1}, "outbox: Config.ClaimCheck.MaxPayloadBytes must not be negative"},
		{outbox.ClaimCheckConfig{Store: dir, Topics: []string{"a..b"}}, "outbox: Config.ClaimCheck.Topics[0]"},
	} {
		_, err := outbox.NewProducer(db.Std, &outbox.Config{ClaimCheck: &c.cfg})
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	p, err := outbox.NewProducer(db.Std, &outbox.Config{ClaimCheck: &outbox.ClaimCheckConfig{Store: dir, Threshold: 10, MaxPayloadBytes: 100}})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.SQL.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	_, err = p.Enqueue(context.Background(), tx, outbox.Message{Topic: "a", Payload: []byte(`"` + strings.Repeat("x", 200) + `"`)})
	if !errors.Is(err, outbox.ErrPayloadTooLarge) {
		t.Errorf("a payload over the claim-check limit: %v", err)
	}
	var n int
	_ = dir.List(context.Background(), time.Now().Add(time.Hour), func(string) error { n++; return nil })
	if n != 0 {
		t.Errorf("%d blobs written for a refused message", n)
	}

	rec := outbox.PublisherFunc(func(context.Context, *outbox.Envelope) error { return nil })
	for _, c := range []struct {
		cfg  outbox.RelayConfig
		want string
	}{
		{outbox.RelayConfig{Routes: []outbox.Route{{Pattern: "*", Publisher: rec, ClaimCheck: "fetch"}}},
			`outbox: RelayConfig.Routes[0] (*).ClaimCheck "fetch": want "inline" or "reference"`},
		{outbox.RelayConfig{Routes: []outbox.Route{{Pattern: "*", Publisher: rec, ClaimCheck: outbox.ClaimInline}}},
			`outbox: RelayConfig.Routes[0] (*): ClaimCheck "inline" fetches claim-checked payloads and RelayConfig.ClaimCheck is nil`},
	} {
		if _, err := outbox.NewRelay(db.Std, &c.cfg); err == nil || err.Error() != c.want {
			t.Errorf("%v, want %q", err, c.want)
		}
	}
	ok := outbox.RelayConfig{ClaimCheck: dir, Routes: []outbox.Route{{Pattern: "*", Publisher: rec, ClaimCheck: outbox.ClaimReference}}}
	if _, err := outbox.NewRelay(db.Std, &ok); err != nil {
		t.Errorf("a valid configuration: %v", err)
	}
}
