package outboxwebhook_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxwebhook"
	"github.com/txoutbox/outbox/webhooksig"
)

// A receiver checks the signature with webhooksig.Verify; the relay's publisher signs
// with the same secret.
func Example() {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhooksig.Verify(secret, r.Header, body, 5*time.Minute, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		fmt.Printf("received %s: %s\n", r.Header.Get("webhook-id"), body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()

	pub, err := outboxwebhook.New(receiver.URL, &outboxwebhook.Config{Secret: secret})
	if err != nil {
		panic(err)
	}
	defer pub.Close()
	errs := pub.Publish(context.Background(), []*publisher.Envelope{{
		ID:      "0190d2c4-7b1e-7cc0-9d4e-5a4f1b2c3d4e",
		Topic:   "order.created",
		Payload: []byte(`{"order_id":42}`),
		Headers: map[string]string{"content-type": "application/json"},
	}})
	fmt.Println("result:", errs[0])
	// Output:
	// received 0190d2c4-7b1e-7cc0-9d4e-5a4f1b2c3d4e: {"order_id":42}
	// result: <nil>
}
