package outbox

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txoutbox/outbox/seal"
)

// BenchmarkSeal is the producer's side of an enqueue of a 1 KiB JSON
// payload before the INSERT, plain and sealed under each algorithm (key
// from memory, and from a key file, which is looked at on every message):
//
//	go test -run '^$' -bench Seal -benchmem .
func BenchmarkSeal(b *testing.B) {
	payload := []byte(`{"pad":"` + strings.Repeat("x", 1024-10) + `"}`)
	key, err := seal.NewKey("k1")
	if err != nil {
		b.Fatal(err)
	}
	keys, err := seal.NewStaticKeys(key)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "keys.json")
	if _, err := seal.CreateKey(path, "", true); err != nil {
		b.Fatal(err)
	}
	fileKeys, err := seal.OpenFileKeys(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		seal *SealConfig
	}{
		{"plain", nil},
		{"aes-256-gcm", &SealConfig{Keys: keys}},
		{"xchacha20-poly1305", &SealConfig{Keys: keys, Algorithm: seal.XChaCha20Poly1305}},
		{"aes-256-gcm-keyfile", &SealConfig{Keys: fileKeys}},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := &Producer[struct{}]{cfg: Config{MaxPayloadBytes: DefaultMaxPayloadBytes, Seal: c.seal}}
			ctx := context.Background()
			for b.Loop() {
				m := Message{Topic: "order.created", Key: "order-42", Payload: payload}
				row, err := m.prepare(0, DefaultMaxPayloadBytes, nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := p.sealRow(ctx, 0, &row, &m, DefaultMaxPayloadBytes); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(payload)))
		})
	}
}
