package outbox_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/seal"
)

// TestSealConfigValidation: a bad seal configuration is refused by
// NewProducer, naming the field.
func TestSealConfigValidation(t *testing.T) {
	t.Parallel()
	db := testdb.New(t, store.SQLite)
	k, _ := seal.NewKey("k1")
	keys, _ := seal.NewStaticKeys(k)
	for _, c := range []struct {
		cfg  outbox.SealConfig
		says string
	}{
		{outbox.SealConfig{}, "Seal.Keys is required"},
		{outbox.SealConfig{Keys: keys, Algorithm: "rot13"}, "Seal.Algorithm"},
		{outbox.SealConfig{Keys: keys, Topics: []string{"a..b"}}, "Seal.Topics[0]"},
		{outbox.SealConfig{Keys: keys, Headers: []string{"content-type"}}, "Seal.Headers[0]"},
		{outbox.SealConfig{Keys: keys, Headers: []string{"x-ok", "outbox-topic"}}, "Seal.Headers[1]"},
	} {
		_, err := outbox.NewProducer(db.Std, &outbox.Config{Seal: &c.cfg})
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.says)
		}
	}
}

// BenchmarkSealEnqueue is a whole enqueue of a 1 KiB payload on
// PostgreSQL, one message per transaction, plain and sealed (key file):
//
//	go test -run '^$' -bench SealEnqueue .
func BenchmarkSealEnqueue(b *testing.B) {
	db := testdb.New(b, store.Postgres)
	path := filepath.Join(b.TempDir(), "keys.json")
	if _, err := seal.CreateKey(path, "", true); err != nil {
		b.Fatal(err)
	}
	keys, err := seal.OpenFileKeys(path)
	if err != nil {
		b.Fatal(err)
	}
	payload := []byte(`{"pad":"` + strings.Repeat("x", 1024-10) + `"}`)
	for _, c := range []struct {
		name string
		seal *outbox.SealConfig
	}{{"plain", nil}, {"sealed", &outbox.SealConfig{Keys: keys}}} {
		b.Run(c.name, func(b *testing.B) {
			p, err := outbox.NewProducer(db.PGX, &outbox.Config{Seal: c.seal, DisableNotify: true})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			for b.Loop() {
				tx, err := db.Pool.Begin(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := p.Enqueue(ctx, tx, outbox.Message{Topic: "bench.seal", Payload: payload}); err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
