package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxkafka"
	"github.com/txoutbox/outbox/publisher/outboxurl"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// sasl=aws-msk-iam is tested at two levels, as no fake Kafka serves
// AWS_MSK_IAM (kfake serves PLAIN and SCRAM): the SASL exchange (the
// mechanism's first client message, from credentials in the standard AWS
// environment variables, is a valid MSK IAM payload whose SigV4 signature
// the AWS SDK's own signer reproduces), and a publish over the Kafka
// protocol against kfake whose SASL requests are answered by a test
// verifier that checks that signature, as MSK would. No real MSK cluster
// is involved.

const (
	mskAccessKey = "AKIAOUTBOXTEST0001"
	mskSecretKey = "msk-secret-key-0001/abcdefghijklmnop"
	mskSession   = "msk-session-token-0001"
)

// mskEnv makes the AWS default chain find exactly the given credentials
// in the environment: no shared files, no instance metadata.
func mskEnv(t *testing.T, access, secret, session, region string) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID":                      access,
		"AWS_SECRET_ACCESS_KEY":                  secret,
		"AWS_SESSION_TOKEN":                      session,
		"AWS_REGION":                             region,
		"AWS_DEFAULT_REGION":                     "",
		"AWS_PROFILE":                            "",
		"AWS_CONFIG_FILE":                        filepath.Join(dir, "config"),
		"AWS_SHARED_CREDENTIALS_FILE":            filepath.Join(dir, "credentials"),
		"AWS_WEB_IDENTITY_TOKEN_FILE":            "",
		"AWS_EC2_METADATA_DISABLED":              "true",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI":     "",
	} {
		t.Setenv(k, v)
	}
}

// mskVerify checks an AWS_MSK_IAM client message as MSK does: the fields
// MSK requires, and a signature that SigV4 with the secret key
// reproduces (computed by the AWS SDK's presigner, not by the code under
// test). It returns the decoded fields.
func mskVerify(msg []byte, secret string) (map[string]string, error) {
	var kv map[string]string
	if err := json.Unmarshal(msg, &kv); err != nil {
		return nil, fmt.Errorf("not a JSON object of strings: %v", err)
	}
	for k, want := range map[string]string{
		"version":             "2020_10_22",
		"action":              "kafka-cluster:Connect",
		"x-amz-algorithm":     "AWS4-HMAC-SHA256",
		"x-amz-signedheaders": "host",
		"x-amz-expires":       "900",
	} {
		if kv[k] != want {
			return kv, fmt.Errorf("%s = %q, want %q", k, kv[k], want)
		}
	}
	if kv["host"] == "" || kv["user-agent"] == "" {
		return kv, fmt.Errorf("host %q, user-agent %q: want both", kv["host"], kv["user-agent"])
	}
	cred := strings.Split(kv["x-amz-credential"], "/")
	if len(cred) != 5 || cred[3] != "kafka-cluster" || cred[4] != "aws4_request" {
		return kv, fmt.Errorf("x-amz-credential %q is not KEY/DATE/REGION/kafka-cluster/aws4_request", kv["x-amz-credential"])
	}
	at, err := time.Parse("20060102T150405Z", kv["x-amz-date"])
	if err != nil || cred[1] != at.Format("20060102") {
		return kv, fmt.Errorf("x-amz-date %q does not match the credential's date %q", kv["x-amz-date"], cred[1])
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(kv["x-amz-signature"]) {
		return kv, fmt.Errorf("x-amz-signature %q is not a SigV4 signature", kv["x-amz-signature"])
	}
	q := url.Values{"Action": {kv["action"]}, "X-Amz-Expires": {kv["x-amz-expires"]}}
	req, err := http.NewRequest(http.MethodGet, "https://"+kv["host"]+"/?"+q.Encode(), nil)
	if err != nil {
		return kv, err
	}
	const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	signed, _, err := v4.NewSigner().PresignHTTP(context.Background(),
		aws.Credentials{AccessKeyID: cred[0], SecretAccessKey: secret, SessionToken: kv["x-amz-security-token"]},
		req, emptySHA256, "kafka-cluster", cred[2], at)
	if err != nil {
		return kv, err
	}
	su, err := url.Parse(signed)
	if err != nil {
		return kv, err
	}
	if want := su.Query().Get("X-Amz-Signature"); kv["x-amz-signature"] != want {
		return kv, errors.New("the signature does not match")
	}
	return kv, nil
}

// TestMSKIAMFirstMessage tests sasl=aws-msk-iam at the SASL exchange
// level: credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_SESSION_TOKEN make a signed MSK IAM payload for the region in the
// broker's host name, which holds no secret key.
func TestMSKIAMFirstMessage(t *testing.T) {
	mskEnv(t, mskAccessKey, mskSecretKey, mskSession, "")
	const host = "b-1.orders.abc123.c2.kafka.eu-west-1.amazonaws.com"
	u, _ := url.Parse("kafka://" + host + ":9098?sasl=aws-msk-iam")
	mech, err := mskIAM.Mechanism(u)
	if err != nil {
		t.Fatal(err)
	}
	if mech.Name() != "AWS_MSK_IAM" {
		t.Fatalf("mechanism %q, want AWS_MSK_IAM", mech.Name())
	}
	sess, msg, err := mech.Authenticate(context.Background(), host+":9098")
	if err != nil {
		t.Fatal(err)
	}
	kv, err := mskVerify(msg, mskSecretKey)
	if err != nil {
		t.Fatalf("first message %s: %v", msg, err)
	}
	if want := mskAccessKey + "/" + kv["x-amz-date"][:8] + "/eu-west-1/kafka-cluster/aws4_request"; kv["x-amz-credential"] != want {
		t.Errorf("x-amz-credential %q, want %q", kv["x-amz-credential"], want)
	}
	if kv["host"] != host || kv["x-amz-security-token"] != mskSession {
		t.Errorf("host %q, x-amz-security-token %q", kv["host"], kv["x-amz-security-token"])
	}
	if strings.Contains(string(msg), mskSecretKey) {
		t.Errorf("the first message holds the secret key")
	}
	if _, err := mskVerify(msg, "another-secret"); err == nil {
		t.Errorf("the signature checks out with another secret key")
	}
	done, _, err := sess.Challenge([]byte(`{"version":"2020_10_22","request-id":"r-1"}`))
	if !done || err != nil {
		t.Errorf("the broker's answer: done %v, %v", done, err)
	}
}

// TestMSKIAMNoCredentials: when the chain finds no credentials the
// mechanism says so without charging the message: the error wraps
// outboxkafka.ErrNoCredentials, which takes the route down.
func TestMSKIAMNoCredentials(t *testing.T) {
	mskEnv(t, "", "", "", "")
	u, _ := url.Parse("kafka://b-1.x.kafka.eu-west-1.amazonaws.com:9098?sasl=aws-msk-iam&region=eu-west-1")
	mech, err := mskIAM.Mechanism(u)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = mech.Authenticate(context.Background(), "b-1.x.kafka.eu-west-1.amazonaws.com:9098")
	if !errors.Is(err, outboxkafka.ErrNoCredentials) {
		t.Fatalf("Authenticate without credentials: %v, want ErrNoCredentials", err)
	}
}

// mskServer makes c answer the SASL requests of AWS_MSK_IAM, accepting a
// message mskVerify accepts with secret, as MSK would.
func mskServer(c *kfake.Cluster, secret string) {
	c.ControlKey(kmsg.SASLHandshake.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.SASLHandshakeRequest)
		resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
		resp.SupportedMechanisms = []string{"AWS_MSK_IAM"}
		if req.Mechanism != "AWS_MSK_IAM" {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		}
		return resp, nil, true
	})
	c.ControlKey(kmsg.SASLAuthenticate.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.SASLAuthenticateRequest)
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		if _, err := mskVerify(req.SASLAuthBytes, secret); err != nil {
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			msg := "[test] access denied: " + err.Error()
			resp.ErrorMessage = &msg
			return resp, nil, true
		}
		resp.SASLAuthBytes = []byte(`{"version":"2020_10_22","request-id":"test-1"}`)
		return resp, nil, true
	})
}

// TestMSKIAMPublish publishes through kafka://…?sasl=aws-msk-iam as the
// command registers it, over the Kafka protocol against kfake with the
// MSK IAM verifier: the right credentials publish; a wrong secret key
// takes the route down (Unavailable), and no error holds a secret. The
// broker is 127.0.0.1, a host name without a region, so the signing
// region is AWS_REGION.
func TestMSKIAMPublish(t *testing.T) {
	outboxurl.RegisterKafkaSASL(mskIAM)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	mskServer(c, mskSecretKey)
	raw := "kafka://" + c.ListenAddrs()[0] + "?sasl=aws-msk-iam&region=eu-west-1"

	publish := func() error {
		p, err := outboxurl.Open(raw, nil)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer func() { _ = p.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		env := publishertest.Envelope("orders", "k", []byte(`{"n":1}`), "application/json", nil)
		return p.Publish(ctx, []*publisher.Envelope{env})[0]
	}
	mskEnv(t, mskAccessKey, mskSecretKey, mskSession, "eu-west-1")
	if err := publish(); err != nil {
		t.Fatalf("publish with the right credentials: %v", err)
	}
	mskEnv(t, mskAccessKey, "wrong-secret-key-0002", mskSession, "eu-west-1")
	err = publish()
	if publisher.Classify(err) != publisher.ClassUnavailable {
		t.Fatalf("publish with a wrong secret key: %v (%v), want unavailable", err, publisher.Classify(err))
	}
	if msg := err.Error(); strings.Contains(msg, "wrong-secret-key") || strings.Contains(msg, mskSession) {
		t.Fatalf("error leaks a secret: %v", err)
	}
}

// TestMSKIAMURLErrors: sasl=aws-msk-iam takes no user:password@ and an
// empty region is refused.
func TestMSKIAMURLErrors(t *testing.T) {
	outboxurl.RegisterKafkaSASL(mskIAM)
	mskEnv(t, mskAccessKey, mskSecretKey, "", "")
	for raw, want := range map[string]string{
		"kafka://AKIA:kafkapass@b-1.x.kafka.eu-west-1.amazonaws.com:9098?sasl=aws-msk-iam": "sasl=aws-msk-iam takes no user:password@",
		"kafka://b-1.x.kafka.eu-west-1.amazonaws.com:9098?sasl=aws-msk-iam&region=":        "sasl=aws-msk-iam: region is empty",
		"kafka://b-1.x.kafka.eu-west-1.amazonaws.com:9098?sasl=aws-msk-iam&profile=x":      `unknown parameter "profile"`,
		"kafka://b-1.x.kafka.eu-west-1.amazonaws.com:9098?sasl=plain&region=eu-west-1":     `unknown parameter "region"`,
	} {
		p, err := outboxurl.Open(raw, nil)
		if err == nil {
			_ = p.Close()
			t.Errorf("Open(%q) succeeded, want %q", raw, want)
			continue
		}
		if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "kafkapass") {
			t.Errorf("Open(%q): %v, want %q without the password", raw, err, want)
		}
	}
}
