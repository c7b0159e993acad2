package outboxurl_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxurl"
)

// The test levels of the SASL mechanisms: PLAIN and SCRAM publish end to
// end against kfake's own SASL (kafka_test.go). kfake serves no
// OAUTHBEARER, so saslServer answers the SASL requests of the Kafka
// protocol in kfake's control hooks, judging the client's message as a
// broker would: OAUTHBEARER publishes end to end over the wire with it.
// AWS_MSK_IAM is tested in cmd/outbox (msk_test.go), where it is
// registered.

// saslServer makes c answer SASLHandshake and SASLAuthenticate for
// mechanism, with verify judging the client's first message (nil: accept;
// an error: SASL_AUTHENTICATION_FAILED with its text). kfake runs without
// its own SASL here, so it does not itself hold requests back before
// authentication; the client sends none before its SASL succeeded.
// It returns the messages verify accepted or refused, in order.
func saslServer(c *kfake.Cluster, mechanism string, verify func([]byte) error) func() [][]byte {
	var mu sync.Mutex
	var seen [][]byte
	c.ControlKey(kmsg.SASLHandshake.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.SASLHandshakeRequest)
		resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
		resp.SupportedMechanisms = []string{mechanism}
		if req.Mechanism != mechanism {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		}
		return resp, nil, true
	})
	c.ControlKey(kmsg.SASLAuthenticate.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.SASLAuthenticateRequest)
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		mu.Lock()
		seen = append(seen, bytes.Clone(req.SASLAuthBytes))
		mu.Unlock()
		if err := verify(req.SASLAuthBytes); err != nil {
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			msg := err.Error()
			resp.ErrorMessage = &msg
		}
		return resp, nil, true
	})
	return func() [][]byte {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// oauthVerifier accepts an RFC 7628 client message with the bearer token
// want and the extensions ext, as a broker's OAUTHBEARER validator would.
func oauthVerifier(want string, ext map[string]string) func([]byte) error {
	return func(msg []byte) error {
		gs2, rest, ok := strings.Cut(string(msg), "\x01")
		if !ok || gs2 != "n,," {
			return fmt.Errorf("bad GS2 header %q", gs2)
		}
		kv := map[string]string{}
		for _, f := range strings.Split(strings.TrimSuffix(rest, "\x01\x01"), "\x01") {
			k, v, _ := strings.Cut(f, "=")
			kv[k] = v
		}
		if kv["auth"] != "Bearer "+want {
			return errors.New("invalid token")
		}
		delete(kv, "auth")
		if fmt.Sprint(kv) != fmt.Sprint(ext) {
			return fmt.Errorf("extensions %v, want %v", kv, ext)
		}
		return nil
	}
}

// TestOpenKafkaOAuthBearer publishes with sasl=oauthbearer over the Kafka
// protocol (tested end to end, against saslServer): the token comes from
// token_file, read again at every authentication, with Confluent-style
// extensions; a wrong or missing token takes the route down
// (Unavailable, not the message's fault) without the token in the error,
// and a token the sidecar then fixes is used at the next connection.
func TestOpenKafkaOAuthBearer(t *testing.T) {
	t.Parallel()
	const good, bad = "eyJhbGciOiJSUzI1NiJ9.good-token-1.sig", "eyJhbGciOiJSUzI1NiJ9.stale-token-2.sig"
	c := kafkaCluster(t)
	seen := saslServer(c, "OAUTHBEARER", oauthVerifier(good, map[string]string{"logicalCluster": "lkc-abc12", "identityPoolId": "pool-Xy9"}))
	addr := c.ListenAddrs()[0]
	file := filepath.Join(t.TempDir(), "token")
	raw := "kafka://" + addr + "?sasl=oauthbearer&token_file=" + url.QueryEscape(file) + "&oauth_ext_logicalCluster=lkc-abc12&oauth_ext_identityPoolId=pool-Xy9"

	// No file yet: Open warns but opens (a sidecar may write it later);
	// the publish finds no credentials: the route is unavailable.
	p := openKafka(t, raw, nil)
	_, err := kafkaPublish(p, 3*time.Second)
	if publisher.Classify(err) != publisher.ClassUnavailable || !strings.Contains(fmt.Sprint(err), "no SASL credentials") {
		t.Fatalf("publish without the token file: %v (%v), want unavailable, no SASL credentials", err, publisher.Classify(err))
	}

	if err := os.WriteFile(file, []byte(bad+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = kafkaPublish(p, 3*time.Second)
	if publisher.Classify(err) != publisher.ClassUnavailable {
		t.Fatalf("publish with a rejected token: %v (%v), want unavailable", err, publisher.Classify(err))
	}
	if strings.Contains(err.Error(), "stale-token") {
		t.Fatalf("error leaks the token: %v", err)
	}

	// The sidecar refreshes the file: the next authentication reads it.
	if err := os.WriteFile(file, []byte(good+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env, err := kafkaPublish(p, 15*time.Second)
	if err != nil {
		t.Fatalf("publish after the token file was refreshed: %v", err)
	}
	kafkaHasID(t, c, env.ID)
	var accepted bool
	for _, m := range seen() {
		accepted = accepted || oauthVerifier(good, map[string]string{"logicalCluster": "lkc-abc12", "identityPoolId": "pool-Xy9"})(m) == nil
	}
	if !accepted {
		t.Fatalf("the server accepted no OAUTHBEARER message")
	}
}

// TestOpenKafkaOAuthBearerEnv: without token_file the token is
// OUTBOX_KAFKA_OAUTH_TOKEN (end to end against saslServer).
func TestOpenKafkaOAuthBearerEnv(t *testing.T) {
	const token = "env-token.abc.def"
	c := kafkaCluster(t)
	saslServer(c, "OAUTHBEARER", oauthVerifier(token, map[string]string{}))
	addr := c.ListenAddrs()[0]

	t.Setenv(outboxurl.KafkaOAuthTokenEnv, "")
	openFails(t, "kafka://"+addr+"?sasl=oauthbearer", nil, []string{"needs a token", "token_file=PATH", outboxurl.KafkaOAuthTokenEnv})
	t.Setenv(outboxurl.KafkaOAuthTokenEnv, "two tokens")
	openFails(t, "kafka://"+addr+"?sasl=oauthbearer", nil, []string{outboxurl.KafkaOAuthTokenEnv, "blanks"}, "two tokens")

	t.Setenv(outboxurl.KafkaOAuthTokenEnv, " "+token+"\n")
	env, err := kafkaPublish(openKafka(t, "kafka://"+addr+"?sasl=OAuthBearer", nil), 15*time.Second)
	if err != nil {
		t.Fatalf("publish with the token from %s: %v", outboxurl.KafkaOAuthTokenEnv, err)
	}
	kafkaHasID(t, c, env.ID)
}

// TestOpenKafkaSASLErrors: the new sasl= values' URL mistakes are one-line
// errors that hold no secret.
func TestOpenKafkaSASLErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw  string
		want []string
	}{
		{"kafka://b:9092?sasl=kerberos", []string{`sasl="kerberos"`, "oauthbearer", "aws-msk-iam"}},
		{"kafka://b:9092?sasl=aws-msk-iam&region=eu-west-1", []string{"sasl=aws-msk-iam needs the AWS SDK", "not registered", "RegisterKafkaSASL", "the outbox command"}},
		{"kafka://app:kafkapass@b:9092?sasl=oauthbearer&token_file=/t", []string{"sasl=oauthbearer takes no user:password@"}},
		{"kafka://b:9092?sasl=oauthbearer&token_file=", []string{"token_file is empty"}},
		{"kafka://b:9092?sasl=oauthbearer&token=kafkapass", []string{`unknown parameter "token"`, "token_file"}},
		{"kafka://b:9092?sasl=plain&token_file=/t", []string{`unknown parameter "token_file"`}},
		{"kafka://b:9092?token_file=/t", []string{`unknown parameter "token_file"`}},
		{"kafka://b:9092?oauth_ext_logicalCluster=lkc-1", []string{`unknown parameter "oauth_ext_logicalCluster"`}},
		{"kafka://b:9092?sasl=oauthbearer&token_file=/t&oauth_ext_logical_cluster=x", []string{`"oauth_ext_logical_cluster"`, "letters only"}},
		{"kafka://b:9092?sasl=oauthbearer&token_file=/t&oauth_ext_=x", []string{`"oauth_ext_"`, "letters only"}},
		{"kafka://b:9092?sasl=oauthbearer&token_file=/t&oauth_ext_auth=x", []string{`"oauth_ext_auth"`, "the token itself"}},
		{"kafka://b:9092?sasl=oauthbearer&token_file=/t&oauth_ext_a=%01", []string{`"oauth_ext_a"`, "printable ASCII"}},
		{"kafka://b:9092?sasl=oauthbearer&token_file=/t&token_file=/u", []string{`"token_file" given 2 times`}},
	} {
		openFails(t, tc.raw, nil, tc.want, "kafkapass")
	}
}

// TestRedactKafkaSecrets: what a kafka:// URL shows in logs, errors,
// status and the web page hides its secrets.
func TestRedactKafkaSecrets(t *testing.T) {
	t.Parallel()
	for raw, secret := range map[string]string{
		"kafka://b:9092?sasl=oauthbearer&token=tok1secret":                    "tok1secret",
		"kafka://b:9092?sasl=oauthbearer&access_token=tok1secret":             "tok1secret",
		"kafka://b:9092?sasl=aws-msk-iam&aws_secret_access_key=key1secret":    "key1secret",
		"kafka://b:9092?sasl=aws-msk-iam&aws_session_token=sess1secret":       "sess1secret",
		"kafka://relay:pw1secret@b:9092?sasl=scram-sha-512":                   "pw1secret",
		"kafka://b:9092?sasl=oauthbearer&oauth_ext_auth=tok1secret&token=abc": "tok1secret",
	} {
		if got := outboxurl.Redact(raw); strings.Contains(got, secret) {
			t.Errorf("Redact(%q) = %q", raw, got)
		}
	}
}

// TestRegisterKafkaSASL: a registered mechanism serves its sasl= value
// with the parameters it declared (end to end: here it is kfake's PLAIN
// under a new name); the URL's userinfo never reaches it, and wiring
// mistakes panic.
func TestRegisterKafkaSASL(t *testing.T) {
	t.Parallel()
	c := kafkaCluster(t, kfake.EnableSASL(), kfake.Superuser("PLAIN", "tester", "reg-s3cret"))
	addr := c.ListenAddrs()[0]
	var gotRegion string
	// Registrations last as long as the process: a name of this run's own
	// (in another case than the URLs use, which must not matter).
	mech := fmt.Sprintf("test-mech-%d", time.Now().UnixNano())
	outboxurl.RegisterKafkaSASL(outboxurl.KafkaSASL{
		Name:   strings.ToUpper(mech),
		Params: []string{"test_region"},
		Mechanism: func(u *url.URL) (sasl.Mechanism, error) {
			if u.User != nil {
				t.Errorf("the mechanism got the userinfo")
			}
			gotRegion = u.Query().Get("test_region")
			if gotRegion == "fail" {
				return nil, errors.New("no such region")
			}
			return plain.Auth{User: "tester", Pass: "reg-s3cret"}.AsMechanism(), nil
		},
	})
	env, err := kafkaPublish(openKafka(t, "kafka://"+addr+"?sasl="+mech+"&test_region=xx-test-1", nil), 15*time.Second)
	if err != nil {
		t.Fatalf("publish with a registered mechanism: %v", err)
	}
	if gotRegion != "xx-test-1" {
		t.Errorf("the mechanism read test_region=%q", gotRegion)
	}
	kafkaHasID(t, c, env.ID, kgo.SASL(plain.Auth{User: "tester", Pass: "reg-s3cret"}.AsMechanism()))

	openFails(t, "kafka://"+addr+"?sasl="+mech+"&test_region=fail", nil, []string{"sasl=" + mech + ": no such region"})
	openFails(t, "kafka://u:kafkapass@"+addr+"?sasl="+mech, nil, []string{"takes no user:password@"}, "kafkapass")
	openFails(t, "kafka://"+addr+"?sasl=plain&test_region=x", nil, []string{`unknown parameter "test_region"`})

	for _, bad := range []outboxurl.KafkaSASL{
		{Name: "plain", Mechanism: func(*url.URL) (sasl.Mechanism, error) { return nil, nil }},
		{Name: "OAUTHBEARER", Mechanism: func(*url.URL) (sasl.Mechanism, error) { return nil, nil }},
		{Name: "x"},
		{Mechanism: func(*url.URL) (sasl.Mechanism, error) { return nil, nil }},
		{Name: "y", Params: []string{"client_id"}, Mechanism: func(*url.URL) (sasl.Mechanism, error) { return nil, nil }},
		{Name: "y", Params: []string{"ca_file"}, Mechanism: func(*url.URL) (sasl.Mechanism, error) { return nil, nil }},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterKafkaSASL(%q, %v) did not panic", bad.Name, bad.Params)
				}
			}()
			outboxurl.RegisterKafkaSASL(bad)
		}()
	}
}
