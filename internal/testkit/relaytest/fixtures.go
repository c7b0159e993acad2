package relaytest

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/seal"
)

// KeyFile makes a key file with one key, k1, in the test's temporary
// directory and opens it.
func KeyFile(t testing.TB) *seal.FileKeys {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys.json")
	if _, err := seal.CreateKey(path, "", true); err != nil {
		t.Fatal(err)
	}
	keys, err := seal.OpenFileKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// ClaimCheckSealed is a producer configuration that keeps payloads over
// 64 bytes in a directory store in the test's temporary directory and
// seals the payloads of the topics matching sealed with k1 of a new key
// file. It returns the store and the key file with it.
func ClaimCheckSealed(t testing.TB, sealed ...string) (*outbox.Config, *claimcheck.Dir, *seal.FileKeys) {
	t.Helper()
	dir, err := claimcheck.OpenDir(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	keys := KeyFile(t)
	return &outbox.Config{
		ClaimCheck: &outbox.ClaimCheckConfig{Store: dir, Threshold: 64},
		Seal:       &outbox.SealConfig{Keys: keys, Topics: sealed},
	}, dir, keys
}

// Produce commits msgs in one transaction through a Producer with cfg
// over db, as an application would: with pgx on PostgreSQL, database/sql
// on the other dialects. It returns their ids.
func Produce(t testing.TB, db *testdb.DB, cfg *outbox.Config, msgs ...outbox.Message) []string {
	t.Helper()
	ctx := context.Background()
	if db.PGX != nil {
		return commitMany(t, db.PGX, cfg, msgs,
			func() (pgx.Tx, error) { return db.Pool.Begin(ctx) },
			func(tx pgx.Tx) error { return tx.Commit(ctx) })
	}
	return commitMany(t, db.Std, cfg, msgs,
		func() (*sql.Tx, error) { return db.SQL.BeginTx(ctx, nil) },
		(*sql.Tx).Commit)
}

// commitMany enqueues msgs through a Producer with cfg over d in a
// transaction from begin and commits it.
func commitMany[TTx any](t testing.TB, d outbox.Driver[TTx], cfg *outbox.Config, msgs []outbox.Message, begin func() (TTx, error), commit func(TTx) error) []string {
	t.Helper()
	p, err := outbox.NewProducer(d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := begin()
	if err != nil {
		t.Fatal(err)
	}
	ids, err := p.EnqueueMany(context.Background(), tx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if err := commit(tx); err != nil {
		t.Fatal(err)
	}
	return ids
}
