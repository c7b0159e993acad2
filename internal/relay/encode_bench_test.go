package relay

import (
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
)

// The encoding on each side of the table, without a database:
//
//	go test -run '^$' -bench Decode -benchmem ./internal/relay/

var benchPayload = []byte(`{"order_id":123456,"customer":"c-42","amount_cents":1999,"pad":"` + strings.Repeat("x", 420) + `"}`)

// BenchmarkDecodeEnvelope is the relay's side: routing a row read from the
// table and decoding its headers into the envelope a publisher gets.
func BenchmarkDecodeEnvelope(b *testing.B) {
	for _, c := range []struct {
		name    string
		payload string
		headers string
	}{
		{"json", string(benchPayload), `{"content-type":"application/json","tenant":"acme","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`},
		{"base64", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+P0BBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6e3x9fn8=",
			`{"content-type":"application/octet-stream","content-transfer-encoding":"base64"}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := &Relay{cfg: Config{MaxPayloadBytes: 1 << 20}}
			r.router.cache = map[string]*routeState{}
			r.router.routes = []*routeState{{Route: Route{Pattern: "order.*"}, name: "order.*", health: newHealth(Route{})}}
			row := store.Row{ID: 1, MessageID: "0193a3c1-7a6e-7cc0-8d5e-3f9b2c1d4e5f", Topic: "order.created", Key: "order-42", HasKey: true,
				Payload: c.payload, Headers: c.headers, CreatedAt: time.Now()}
			for b.Loop() {
				if it := r.prepare(&row); it.decided {
					b.Fatalf("decided: %+v", it.out)
				}
			}
		})
	}
}
