package outboxgcs_test

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txoutbox/outbox/claimcheck/outboxgcs"
)

func parse(t testing.TB, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestOpenURL: gs://BUCKET/PREFIX?endpoint=URL opens a store of the
// emulator at URL that writes under PREFIX/.
func TestOpenURL(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	srv := fakeGCS(t)
	ctx := context.Background()
	st, err := outboxgcs.OpenURL(ctx, parse(t, "gs://blobs/outbox/claims?endpoint="+url.QueryEscape(srv.URL())))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.Bucket() != "blobs" || st.Prefix() != "outbox/claims/" {
		t.Errorf("bucket %q, prefix %q", st.Bucket(), st.Prefix())
	}
	data := []byte("a claim-checked payload")
	if err := st.Put(ctx, id+".x", data); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Get(ctx, id+".x"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get: %q, %v", got, err)
	}
	if o, err := srv.GetObject("blobs", "outbox/claims/"+id+".x"); err != nil || !bytes.Equal(o.Content, data) {
		t.Errorf("the object under the prefix: %q, %v", o.Content, err)
	}
	// A trailing '/' and a bare bucket.
	for raw, prefix := range map[string]string{"gs://blobs/p/": "p/", "gs://blobs": "", "gs://blobs/": "", "GS://blobs/q": "q/"} {
		st, err := outboxgcs.OpenURL(ctx, parse(t, raw+"?endpoint="+url.QueryEscape(srv.URL())))
		if err != nil {
			t.Errorf("OpenURL(%s): %v", raw, err)
			continue
		}
		if st.Prefix() != prefix {
			t.Errorf("OpenURL(%s): prefix %q, want %q", raw, st.Prefix(), prefix)
		}
		_ = st.Close()
	}
}

// TestOpenURLEmulatorHost: without endpoint, STORAGE_EMULATOR_HOST sends
// the client to an emulator, as Google's client libraries do.
func TestOpenURLEmulatorHost(t *testing.T) {
	srv := fakeGCS(t)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL(), "http://"))
	ctx := context.Background()
	st, err := outboxgcs.OpenURL(ctx, parse(t, "gs://blobs/env"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Put(ctx, id+".env", []byte("via the environment")); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Get(ctx, id+".env"); err != nil || string(got) != "via the environment" {
		t.Fatalf("Get: %q, %v", got, err)
	}
	if _, err := srv.GetObject("blobs", "env/"+id+".env"); err != nil {
		t.Errorf("the object under env/: %v", err)
	}
}

// TestOpenURLErrors: bad URLs are one-line errors that name what is wrong
// (an unknown parameter by its name) and hold no secret.
func TestOpenURLErrors(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	ctx := context.Background()
	for raw, want := range map[string]string{
		"gs:///prefix":                              "no bucket",
		"gs:blobs":                                  "no bucket",
		"gs://key:secret@blobs":                     "no credentials",
		"gs://blobs?endpiont=http://h:1":            `unknown parameter "endpiont"`,
		"gs://blobs?region=eu":                      `unknown parameter "region"`,
		"gs://blobs?endpoint=ftp://h":               "endpoint",
		"gs://blobs?endpoint=127.0.0.1:4443":        "endpoint",
		"gs://blobs?endpoint=http://u:secret@h:1":   "endpoint",
		"gs://blobs?endpoint=http://h:1/storage/v1": "endpoint",
		"gs://blobs?endpoint=http://a&endpoint=b":   "more than once",
		"gs://Blobs":                                "bucket",
		"gs://b":                                    "bucket",
		"gs://blobs:443":                            "bucket",
		"gs://-blobs":                               "bucket",
		"gs://blobs#frag":                           "fragment",
		"s3://blobs":                                "want gs://",
		"file:///var/lib/blobs":                     "want gs://",
	} {
		_, err := outboxgcs.OpenURL(ctx, parse(t, raw))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "\n") {
			t.Errorf("OpenURL(%s): %v; want one line saying %q", raw, err, want)
		}
	}
}

// TestOpenURLCredentials: without an emulator the client needs
// Application Default Credentials; credentials that cannot be loaded are
// a one-line error at open, without the key file's contents.
func TestOpenURLCredentials(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	dir := t.TempDir()
	key := filepath.Join(dir, "key.json")
	if err := os.WriteFile(key, []byte(`{"type":"service_account","private_key":"-----BEGIN PRIVATE KEY-----\nnot-a-key-secret\n-----END PRIVATE KEY-----\n","client_email":"relay@example.iam.gserviceaccount.com"`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{key, filepath.Join(dir, "missing.json")} {
		t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
		st, err := outboxgcs.OpenURL(context.Background(), parse(t, "gs://blobs/p"))
		if err == nil {
			_ = st.Close()
			t.Errorf("OpenURL with the credentials %s: no error", path)
			continue
		}
		if !strings.Contains(err.Error(), "outboxgcs:") || strings.Contains(err.Error(), "not-a-key-secret") || strings.Contains(err.Error(), "\n") {
			t.Errorf("OpenURL with the credentials %s: %v; want one line without the key", path, err)
		}
	}
}
