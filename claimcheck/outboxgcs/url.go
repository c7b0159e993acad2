package outboxgcs

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"
)

// ParamEndpoint, the one URL parameter of OpenURL, is the base URL of a
// Cloud Storage emulator (fake-gcs-server, a test server), e.g.
// http://127.0.0.1:4443: the client then sends no credentials.
const ParamEndpoint = "endpoint"

// emulatorEnv names an emulator for every client when set (HOST:PORT or a
// URL); the client then sends no credentials.
const emulatorEnv = "STORAGE_EMULATOR_HOST"

// OpenURL returns the store that gs://BUCKET[/PREFIX][?endpoint=URL]
// names. PREFIX, when given, ends with "/" added when missing.
//
// Without endpoint the client authenticates with Google's Application
// Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud's
// application-default login, the workload's service account on Google
// Cloud), and STORAGE_EMULATOR_HOST, when set, sends it to an emulator
// without credentials instead. With endpoint it talks to the emulator at
// that URL, without credentials.
//
// Errors are one line and hold no secret; the URL must carry none (no
// user:password@).
func OpenURL(ctx context.Context, u *url.URL) (*Store, error) {
	const form = "want gs://BUCKET[/PREFIX][?endpoint=URL]"
	if !strings.EqualFold(u.Scheme, Scheme) {
		return nil, fmt.Errorf("outboxgcs: scheme %q: %s", u.Scheme, form)
	}
	if u.User != nil {
		return nil, errors.New("outboxgcs: the URL must hold no credentials: they come from Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, the service account)")
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, fmt.Errorf("outboxgcs: no bucket: %s", form)
	}
	if u.Fragment != "" {
		return nil, fmt.Errorf("outboxgcs: a #fragment: %s", form)
	}
	bucket := u.Host
	if !validBucket(bucket) {
		return nil, fmt.Errorf("outboxgcs: bucket %q: want 3-222 lowercase letters, digits, '-', '_' and '.', starting and ending with a letter or digit", bucket)
	}
	prefix := strings.TrimPrefix(u.Path, "/")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	q := u.Query()
	for k, v := range q {
		if k != ParamEndpoint {
			return nil, fmt.Errorf("outboxgcs: unknown parameter %q (gs takes %s)", k, ParamEndpoint)
		}
		if len(v) > 1 {
			return nil, fmt.Errorf("outboxgcs: parameter %q given more than once", k)
		}
	}
	var opts []option.ClientOption
	if endpoint := q.Get(ParamEndpoint); endpoint != "" {
		e, err := url.Parse(endpoint)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" || e.User != nil ||
			(e.Path != "" && e.Path != "/") || e.RawQuery != "" || e.Fragment != "" {
			return nil, fmt.Errorf("outboxgcs: %s: want http(s)://HOST[:PORT] of an emulator, without credentials", ParamEndpoint)
		}
		opts = append(opts,
			option.WithEndpoint(e.Scheme+"://"+e.Host+"/storage/v1/"),
			option.WithoutAuthentication(),
			// Emulators serve the JSON API on any host name; the XML
			// API's downloads want theirs.
			storage.WithJSONReads(),
		)
	} else if os.Getenv(emulatorEnv) != "" {
		opts = append(opts, storage.WithJSONReads())
	}
	client, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return nil, fail("Cloud Storage client (Application Default Credentials): %w", err)
	}
	s, err := New(client, &Config{Bucket: bucket, Prefix: prefix})
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

// validBucket: a bucket name as Cloud Storage takes it (3-63 characters,
// up to 222 with dots; lowercase letters, digits, '-', '_', '.'; a letter
// or digit at both ends).
func validBucket(name string) bool {
	if len(name) < 3 || len(name) > 222 || (len(name) > 63 && !strings.Contains(name, ".")) {
		return false
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	if !alnum(name[0]) || !alnum(name[len(name)-1]) {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !alnum(c) && !slices.Contains([]byte("-_."), c) {
			return false
		}
	}
	return true
}
