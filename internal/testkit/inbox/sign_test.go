package inbox_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"
)

// signature computes a Standard Webhooks v1 signature independently of the
// publisher's code.
func signature(t *testing.T, secret, id string, ts time.Time, body []byte) string {
	t.Helper()
	key := []byte(secret)
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok {
		var err error
		if key, err = base64.StdEncoding.DecodeString(rest); err != nil {
			t.Fatal(err)
		}
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(ts.Unix(), 10) + "."))
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}
