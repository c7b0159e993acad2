package webhooksig_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/txoutbox/outbox/webhooksig"
)

// hmacSign is the Standard Webhooks signature, computed independently of
// the package's code.
func hmacSign(key []byte, id, ts string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func signedHeader(id, ts, sig string) http.Header {
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", ts)
	h.Set("webhook-signature", sig)
	return h
}

// TestVerifyKnownVector checks the example of the Standard Webhooks
// specification, so that receivers using its libraries agree with us.
func TestVerifyKnownVector(t *testing.T) {
	t.Parallel()
	const (
		secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		id     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		ts     = "1614265330"
		body   = `{"test": 2432232314}`
		sig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	// The same signature computed by hand.
	key, _ := base64.StdEncoding.DecodeString("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "." + body))
	if got := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)); got != sig {
		t.Fatalf("hand-computed signature %q, want %q", got, sig)
	}
	now := time.Unix(1614265330, 0).Add(time.Minute)
	if err := webhooksig.Verify(secret, signedHeader(id, ts, sig), []byte(body), 0, now); err != nil {
		t.Errorf("Verify(spec example) = %v", err)
	}
}

func TestVerifyRawSecretVector(t *testing.T) {
	t.Parallel()
	const secret, id, ts, body = "plain secret", "0190d2c4-7b1e-7cc0-9d4e-5a4f1b2c3d4e", "1700000000", "\x00\xffbinary"
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(id + "." + ts + "." + body))
	sig := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	if err := webhooksig.Verify(secret, signedHeader(id, ts, sig), []byte(body), time.Minute, time.Unix(1700000000, 0)); err != nil {
		t.Errorf("Verify = %v", err)
	}
}

func TestVerifyRejects(t *testing.T) {
	t.Parallel()
	const secret, id, body = "whsec_c2VjcmV0LWtleS1ieXRlcw==", "msg-1", `{"n":1}`
	now := time.Unix(1_700_000_000, 0)
	ts := "1700000000"
	key, _ := base64.StdEncoding.DecodeString("c2VjcmV0LWtleS1ieXRlcw==")
	good := hmacSign(key, id, ts, []byte(body))
	if err := webhooksig.Verify(secret, signedHeader(id, ts, good), []byte(body), 0, now); err != nil {
		t.Fatalf("Verify(good) = %v", err)
	}
	stale := "1699999000" // 1000 s old
	staleSig := hmacSign(key, id, stale, []byte(body))
	future := "1700001000"
	futureSig := hmacSign(key, id, future, []byte(body))
	for _, tc := range []struct {
		name   string
		secret string
		header http.Header
		body   string
		tol    time.Duration
		want   error
	}{
		{"tampered body", secret, signedHeader(id, ts, good), `{"n":2}`, 0, webhooksig.ErrInvalidSignature},
		{"wrong secret", "whsec_d3Jvbmcta2V5", signedHeader(id, ts, good), body, 0, webhooksig.ErrInvalidSignature},
		{"secret used raw instead of decoded", "c2VjcmV0LWtleS1ieXRlcw==", signedHeader(id, ts, good), body, 0, webhooksig.ErrInvalidSignature},
		{"other id", secret, signedHeader("msg-2", ts, good), body, 0, webhooksig.ErrInvalidSignature},
		{"timestamp changed", secret, signedHeader(id, "1700000001", good), body, 0, webhooksig.ErrInvalidSignature},
		{"stale", secret, signedHeader(id, stale, staleSig), body, 5 * time.Minute, webhooksig.ErrTimestampOutOfRange},
		{"stale default tolerance", secret, signedHeader(id, stale, staleSig), body, 0, webhooksig.ErrTimestampOutOfRange},
		{"future", secret, signedHeader(id, future, futureSig), body, 0, webhooksig.ErrTimestampOutOfRange},
		{"bad timestamp", secret, signedHeader(id, "yesterday", good), body, 0, webhooksig.ErrInvalidTimestamp},
		{"no signature", secret, signedHeader(id, ts, ""), body, 0, webhooksig.ErrMissingHeaders},
		{"no id", secret, signedHeader("", ts, good), body, 0, webhooksig.ErrMissingHeaders},
		{"v2 only", secret, signedHeader(id, ts, "v2"+good[2:]), body, 0, webhooksig.ErrInvalidSignature},
		{"empty secret", "", signedHeader(id, ts, good), body, 0, webhooksig.ErrInvalidSecret},
		{"bad whsec", "whsec_***", signedHeader(id, ts, good), body, 0, webhooksig.ErrInvalidSecret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := webhooksig.Verify(tc.secret, tc.header, []byte(tc.body), tc.tol, now)
			if !errors.Is(err, tc.want) {
				t.Errorf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("stale accepted with a wide tolerance", func(t *testing.T) {
		t.Parallel()
		if err := webhooksig.Verify(secret, signedHeader(id, stale, staleSig), []byte(body), time.Hour, now); err != nil {
			t.Errorf("Verify = %v", err)
		}
	})
	t.Run("one of several signatures", func(t *testing.T) {
		t.Parallel()
		h := signedHeader(id, ts, "v1,b2xkLXNpZ25hdHVyZQ== "+good+" v1a,whatever")
		if err := webhooksig.Verify(secret, h, []byte(body), 0, now); err != nil {
			t.Errorf("Verify = %v", err)
		}
	})
}

// TestSignMatchesVerify: what Sign makes, Verify accepts, and it is the
// independently computed signature.
func TestSignMatchesVerify(t *testing.T) {
	t.Parallel()
	key := []byte("a key of some bytes")
	const id, ts, body = "msg-1", "1700000000", `{"n":1}`
	sig := webhooksig.Sign(key, id, ts, []byte(body))
	if want := hmacSign(key, id, ts, []byte(body)); sig != want {
		t.Fatalf("Sign = %q, want %q", sig, want)
	}
	if err := webhooksig.Verify(string(key), signedHeader(id, ts, sig), []byte(body), 0, time.Unix(1_700_000_000, 0)); err != nil {
		t.Errorf("Verify(Sign(…)) = %v", err)
	}
}

func TestParseSecret(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		secret string
		key    string
		reason string // "" when valid
	}{
		{"whsec_c2VjcmV0LWtleS1ieXRlcw==", "secret-key-bytes", ""},
		{"plain secret", "plain secret", ""},
		{"c2VjcmV0LWtleS1ieXRlcw==", "c2VjcmV0LWtleS1ieXRlcw==", ""},
		{"", "", "the secret is empty"},
		{"whsec_", "", "a whsec_ secret must be followed by base64"},
		{"whsec_***", "", "a whsec_ secret must be followed by base64"},
	} {
		key, err := webhooksig.ParseSecret(tc.secret)
		switch {
		case tc.reason == "" && (err != nil || string(key) != tc.key):
			t.Errorf("ParseSecret(%q) = %q, %v; want %q", tc.secret, key, err, tc.key)
		case tc.reason != "" && (!errors.Is(err, webhooksig.ErrInvalidSecret) || err.Error() != tc.reason || key != nil):
			t.Errorf("ParseSecret(%q) = %q, %v; want ErrInvalidSecret saying %q", tc.secret, key, err, tc.reason)
		}
	}
}
