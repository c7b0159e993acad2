package outbox

import (
	"strings"
	"testing"

	"github.com/txoutbox/outbox/publisher"
)

// The producer's side of the table, without a database (the relay's side
// is BenchmarkDecodeEnvelope in internal/relay):
//
//	go test -run '^$' -bench Encode -benchmem .

var benchPayload = []byte(`{"order_id":123456,"customer":"c-42","amount_cents":1999,"pad":"` + strings.Repeat("x", 420) + `"}`)

// BenchmarkEncodeMessage is the producer's side of an enqueue before the
// INSERT: validation, the JSON payload check, the id and the headers.
func BenchmarkEncodeMessage(b *testing.B) {
	trace := map[string]string{publisher.HeaderTraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	for b.Loop() {
		m := Message{Topic: "order.created", Key: "order-42", Payload: benchPayload, Headers: map[string]string{"tenant": "acme"}}
		if _, err := m.prepare(0, DefaultMaxPayloadBytes, trace); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(benchPayload)))
}
