package webhooksig_test

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/txoutbox/outbox/webhooksig"
)

// A receiver of its own checks a webhook the relay signed, and refuses a
// tampered body and a replay of an old request.
func Example() {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	key, err := webhooksig.ParseSecret(secret)
	if err != nil {
		panic(err)
	}
	sent := time.Unix(1_700_000_000, 0)
	body := []byte(`{"order_id":42}`)

	// The headers the relay's publisher sends with the body.
	h := http.Header{}
	h.Set(webhooksig.HeaderID, "0190d2c4-7b1e-7cc0-9d4e-5a4f1b2c3d4e")
	h.Set(webhooksig.HeaderTimestamp, strconv.FormatInt(sent.Unix(), 10))
	h.Set(webhooksig.HeaderSignature, webhooksig.Sign(key, h.Get(webhooksig.HeaderID), h.Get(webhooksig.HeaderTimestamp), body))

	fmt.Println("fresh:", webhooksig.Verify(secret, h, body, 0, sent.Add(time.Second)))
	fmt.Println("tampered:", webhooksig.Verify(secret, h, []byte(`{"order_id":43}`), 0, sent.Add(time.Second)))
	fmt.Println("an hour later:", webhooksig.Verify(secret, h, body, 0, sent.Add(time.Hour)))
	// Output:
	// fresh: <nil>
	// tampered: webhook: no matching signature
	// an hour later: webhook: webhook-timestamp outside the tolerance
}
