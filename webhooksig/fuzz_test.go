package webhooksig_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/webhooksig"
)

// FuzzVerify feeds Verify untrusted headers and bodies: it never panics,
// it accepts a request only if one of its v1 signatures is the one Sign
// makes for the id, timestamp and body under the secret, and it accepts
// what Sign makes.
func FuzzVerify(f *testing.F) {
	f.Add("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", []byte(`{"test": 2432232314}`))
	f.Add("plain secret", "id", "1700000000", "v1,AAAA v2,BBBB", []byte("\x00\xff"))
	f.Add("whsec_***", "", "-1", ",", []byte{})
	f.Add("s", "id", "99999999999999999999", "v1 v1, ,v1", []byte("x"))
	f.Fuzz(func(t *testing.T, secret, id, ts, sigs string, body []byte) {
		h := http.Header{}
		h.Set(webhooksig.HeaderID, id)
		h.Set(webhooksig.HeaderTimestamp, ts)
		h.Set(webhooksig.HeaderSignature, sigs)
		sec, tsErr := strconv.ParseInt(ts, 10, 64)
		now := time.Unix(sec, 0)
		err := webhooksig.Verify(secret, h, body, time.Minute, now)
		key, keyErr := webhooksig.ParseSecret(secret)
		if err == nil {
			if keyErr != nil || tsErr != nil {
				t.Fatalf("accepted with secret %q (%v) and timestamp %q (%v)", secret, keyErr, ts, tsErr)
			}
			want := webhooksig.Sign(key, h.Get(webhooksig.HeaderID), h.Get(webhooksig.HeaderTimestamp), body)
			found := false
			for _, s := range strings.Fields(sigs) {
				found = found || s == want
			}
			if !found {
				t.Fatalf("accepted %q, which does not hold %q", sigs, want)
			}
		}
		if keyErr != nil || tsErr != nil || h.Get(webhooksig.HeaderID) == "" || h.Get(webhooksig.HeaderTimestamp) == "" {
			return
		}
		h.Set(webhooksig.HeaderSignature, webhooksig.Sign(key, h.Get(webhooksig.HeaderID), h.Get(webhooksig.HeaderTimestamp), body))
		if err := webhooksig.Verify(secret, h, body, time.Minute, now); err != nil {
			t.Fatalf("Verify of what Sign made: %v", err)
		}
	})
}
