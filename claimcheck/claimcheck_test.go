package claimcheck_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/txoutbox/outbox/claimcheck"
)

const id = "0190a7c4-1111-7000-8000-000000000001"

func TestValidKey(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]bool{
		id:                       true,
		id + "." + "ab12":        true,
		"a":                      true,
		"A_b-c.d":                true,
		"":                       false,
		"../etc/passwd":          false,
		"a/../../b":              false,
		"a/b":                    false,
		`a\b`:                    false,
		"a..b":                   false,
		".hidden":                false,
		".tmp-123":               false,
		"-flag":                  false,
		"a b":                    false,
		"a\x00b":                 false,
		"é":                      false,
		strings.Repeat("a", 255): true,
		strings.Repeat("a", 256): false,
	} {
		if got := claimcheck.ValidKey(key); got != want {
			t.Errorf("ValidKey(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestDir(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	root := t.TempDir()
	d, err := claimcheck.OpenDir(filepath.Join(root, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("\x00\xffpayload"), 1000)
	key := claimcheck.Key(id, data)
	if err := d.Put(ctx, key, data); err != nil {
		t.Fatal(err)
	}
	got, err := d.Get(ctx, key)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get: %d bytes, %v", len(got), err)
	}
	if st, err := os.Stat(filepath.Join(d.Path(), key)); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("blob file: %v %v, want mode 0600", st, err)
	}
	if err := d.Put(ctx, key, []byte("replaced")); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.Get(ctx, key); string(got) != "replaced" {
		t.Errorf("after a second Put: %q", got)
	}
	for _, bad := range []string{"../escape", "a/b", ".tmp-x", ""} {
		if err := d.Put(ctx, bad, data); !errors.Is(err, claimcheck.ErrInvalidKey) {
			t.Errorf("Put(%q): %v, want ErrInvalidKey", bad, err)
		}
		if _, err := d.Get(ctx, bad); !errors.Is(err, claimcheck.ErrInvalidKey) {
			t.Errorf("Get(%q): %v, want ErrInvalidKey", bad, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "escape")); err == nil {
		t.Error("a key wrote outside the directory")
	}
	if _, err := d.Get(ctx, "missing"); !errors.Is(err, claimcheck.ErrNotFound) {
		t.Errorf("Get of a missing key: %v", err)
	}
	if err := d.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get(ctx, key); !errors.Is(err, claimcheck.ErrNotFound) {
		t.Errorf("Get after Delete: %v", err)
	}
	if err := d.Delete(ctx, key); err != nil {
		t.Errorf("Delete of a missing key: %v", err)
	}
	if f, err := os.CreateTemp(root, "file"); err == nil {
		f.Close()
		if _, err := claimcheck.OpenDir(f.Name()); err == nil {
			t.Error("OpenDir of a file: no error")
		}
	}
}

// TestDirList: List names the blobs older than its bound, skips younger
// ones and files that are no keys, and removes stale temporary files.
func TestDirList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := claimcheck.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	for _, k := range []string{"old1", "old2", "young"} {
		if err := d.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{".tmp-crashed", ".tmp-writing", ".other", "old1", "old2"} {
		p := filepath.Join(d.Path(), name)
		if _, err := os.Stat(p); err != nil {
			if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if name != ".tmp-writing" {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	var keys []string
	err = d.List(ctx, time.Now().Add(-time.Hour), func(k string) error {
		keys = append(keys, k)
		return d.Delete(ctx, k)
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"old1", "old2"}) {
		t.Errorf("listed %v, want [old1 old2]", keys)
	}
	for name, want := range map[string]bool{".tmp-crashed": false, ".tmp-writing": true, ".other": true, "young": true, "old1": false} {
		_, err := os.Stat(filepath.Join(d.Path(), name))
		if (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", name, err == nil, want)
		}
	}
	stop := errors.New("stop")
	if err := d.List(ctx, time.Now().Add(time.Hour), func(string) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("List did not return fn's error: %v", err)
	}
}

func TestRef(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := claimcheck.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	blob := []byte(`{"big":true}`)
	ref := claimcheck.NewRef(d.Scheme(), id, blob)
	if ref.Key != claimcheck.Key(id, blob) || ref.Size != int64(len(blob)) {
		t.Fatalf("ref %+v", ref)
	}
	if got, ok := claimcheck.MessageID(ref.Key); !ok || got != id {
		t.Errorf("MessageID(%q) = %q, %v", ref.Key, got, ok)
	}
	h := map[string]string{"content-type": "application/json"}
	ref.SetHeaders(h)
	if h[claimcheck.HeaderRef] != "file:"+ref.Key || h[claimcheck.HeaderSize] != "12" || len(h[claimcheck.HeaderSHA256]) != 64 {
		t.Fatalf("headers %v", h)
	}
	back, ok, err := claimcheck.ParseHeaders(h)
	if !ok || err != nil || back != ref {
		t.Fatalf("ParseHeaders: %+v %v %v", back, ok, err)
	}
	if _, err := claimcheck.Fetch(ctx, d, ref); !errors.Is(err, claimcheck.ErrNotFound) {
		t.Errorf("Fetch before Put: %v", err)
	}
	if err := d.Put(ctx, ref.Key, blob); err != nil {
		t.Fatal(err)
	}
	if got, err := claimcheck.Fetch(ctx, d, ref); err != nil || !bytes.Equal(got, blob) {
		t.Errorf("Fetch: %q %v", got, err)
	}
	for _, other := range [][]byte{[]byte(`{"big":false}`), []byte(`{"big":true} `)} {
		if err := d.Put(ctx, ref.Key, other); err != nil {
			t.Fatal(err)
		}
		if _, err := claimcheck.Fetch(ctx, d, ref); !errors.Is(err, claimcheck.ErrMismatch) {
			t.Errorf("Fetch of %q: %v, want ErrMismatch", other, err)
		}
	}
	s3 := ref
	s3.Scheme = "s3"
	if _, err := claimcheck.Fetch(ctx, d, s3); !errors.Is(err, claimcheck.ErrWrongStore) {
		t.Errorf("Fetch of an s3 reference from a Dir: %v", err)
	}
	claimcheck.RemoveHeaders(h)
	if len(h) != 1 {
		t.Errorf("after RemoveHeaders: %v", h)
	}
	if _, ok, err := claimcheck.ParseHeaders(h); ok || err != nil {
		t.Errorf("ParseHeaders of plain headers: %v %v", ok, err)
	}
	good := map[string]string{}
	ref.SetHeaders(good)
	for name, change := range map[string][2]string{
		"no scheme":    {claimcheck.HeaderRef, ref.Key},
		"bad scheme":   {claimcheck.HeaderRef, "S3:" + ref.Key},
		"traversal":    {claimcheck.HeaderRef, "file:../../etc/passwd"},
		"no size":      {claimcheck.HeaderSize, ""},
		"bad size":     {claimcheck.HeaderSize, "-1"},
		"short digest": {claimcheck.HeaderSHA256, "abc"},
		"upper digest": {claimcheck.HeaderSHA256, strings.ToUpper(ref.SHA256)},
	} {
		h := map[string]string{}
		for k, v := range good {
			h[k] = v
		}
		h[change[0]] = change[1]
		if _, ok, err := claimcheck.ParseHeaders(h); !ok || !errors.Is(err, claimcheck.ErrInvalidRef) {
			t.Errorf("%s: %v %v, want ErrInvalidRef", name, ok, err)
		}
	}
}

// FuzzParseHeaders: untrusted headers never panic, and a reference that
// parses has a valid key and prints back as it was given.
func FuzzParseHeaders(f *testing.F) {
	f.Add("file:"+id+".ab", "12", strings.Repeat("ab", 32))
	f.Add("s3:../x", "-1", "")
	f.Fuzz(func(t *testing.T, ref, size, digest string) {
		h := map[string]string{claimcheck.HeaderRef: ref, claimcheck.HeaderSize: size, claimcheck.HeaderSHA256: digest}
		r, ok, err := claimcheck.ParseHeaders(h)
		if !ok {
			t.Fatal("ok false with a reference header")
		}
		if err == nil && (!claimcheck.ValidKey(r.Key) || r.String() != ref || r.Size < 0) {
			t.Fatalf("parsed %+v from %q", r, ref)
		}
	})
}
