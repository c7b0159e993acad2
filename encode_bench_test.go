package outbox

import (
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/internal/store"
)

// The encoding on each side of the table, without a database:
//
//	go test -run '^$' -bench 'Encode|Decode' -benchmem .

var benchPayload = []byte(`{"order_id":123456,"customer":"c-42","amount_cents":1999,"pad":"` + strings.Repeat("x", 420) + `"}`)

// BenchmarkEncodeMessage is the producer's side of an enqueue before the
// INSERT: validation, the JSON payload check, the id and the headers.
func BenchmarkEncodeMessage(b *testing.B) {
	trace := map[string]string{HeaderTraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	for b.Loop() {
		m := Message{Topic: "order.created", Key: "order-42", Payload: benchPayload, Headers: map[string]string{"tenant": "acme"}}
		if _, err := m.prepare(0, DefaultMaxPayloadBytes, trace); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(benchPayload)))
}

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
			r := &Relay{cfg: RelayConfig{MaxPayloadBytes: DefaultMaxPayloadBytes}}
			r.router.cache = map[string]*routeState{}
			r.router.routes = []*routeState{{Route: Route{Pattern: "order.*"}, name: "order.*"}}
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
