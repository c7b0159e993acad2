package claimcheck_test

import (
	"context"
	"fmt"
	"os"

	"github.com/txoutbox/outbox/claimcheck"
)

// A consumer in reference mode receives the claim-check headers and an
// empty body, and fetches the payload with its own store.
func Example() {
	dir, _ := os.MkdirTemp("", "blobs")
	defer os.RemoveAll(dir)
	store, _ := claimcheck.OpenDir(dir)
	ctx := context.Background()

	// What the producer did at enqueue.
	payload := []byte(`{"invoice":"…a large document…"}`)
	ref := claimcheck.NewRef(store.Scheme(), "0190a7c4-1111-7000-8000-000000000001", payload)
	_ = store.Put(ctx, ref.Key, payload)
	headers := map[string]string{"content-type": "application/json"}
	ref.SetHeaders(headers)

	// What the consumer does with the message's headers.
	got, ok, err := claimcheck.ParseHeaders(headers)
	if ok && err == nil {
		body, err := claimcheck.Fetch(ctx, store, got)
		fmt.Println(string(body), err)
	}
	fmt.Println(headers[claimcheck.HeaderSize], headers[claimcheck.HeaderRef][:5])
	// Output:
	// {"invoice":"…a large document…"} <nil>
	// 36 file:
}
