package outbox_test

import (
	"strings"
	"testing"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testdb"
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
