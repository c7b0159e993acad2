package outboxgcs_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"google.golang.org/api/option"

	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/claimcheck/outboxgcs"
)

// fakeGCS starts fake-gcs-server on a loopback port of the test process
// (Google ships no Cloud Storage emulator; the Go client's own users test
// against this one), with the bucket "blobs", stopped at cleanup. It
// answers over HTTP like the service, so the store's requests are the
// ones it sends to Google.
func fakeGCS(t testing.TB) *fakestorage.Server {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http",
		Host:   "127.0.0.1", // Port 0: one the system picks
		// Downloads by the XML API's path (/BUCKET/OBJECT) for this host.
		PublicHost: "127.0.0.1",
	})
	if err != nil {
		t.Fatalf("start fake-gcs-server: %v", err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "blobs"})
	return srv
}

// client is a Cloud Storage client of srv, as OpenURL makes one for
// ?endpoint=.
func client(t testing.TB, srv *fakestorage.Server) *storage.Client {
	t.Helper()
	c, err := storage.NewClient(context.Background(),
		option.WithEndpoint(srv.URL()+"/storage/v1/"), option.WithoutAuthentication(), storage.WithJSONReads())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newStore(t testing.TB, c *storage.Client, bucket, prefix string) *outboxgcs.Store {
	t.Helper()
	s, err := outboxgcs.New(c, &outboxgcs.Config{Bucket: bucket, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// write puts an object the way another program would: no precondition,
// replacing any object of the name.
func write(t testing.TB, c *storage.Client, bucket, name string, data []byte) {
	t.Helper()
	w := c.Bucket(bucket).Object(name).NewWriter(context.Background())
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
}

func read(t testing.TB, c *storage.Client, bucket, name string) []byte {
	t.Helper()
	r, err := c.Bucket(bucket).Object(name).NewReader(context.Background())
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	defer r.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

const id = "0190a7c4-1111-7000-8000-000000000001"

func keys(t testing.TB, s claimcheck.Store, olderThan time.Time) []string {
	t.Helper()
	var ks []string
	if err := s.List(context.Background(), olderThan, func(k string) error { ks = append(ks, k); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(ks)
	return ks
}

// TestStore: Put, Get, Delete and List under a prefix, with a 17 MiB
// blob (more than the client's 16 MiB chunk: a resumable upload) and a
// small one (a single request).
func TestStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := fakeGCS(t)
	c := client(t, srv)
	s := newStore(t, c, "blobs", "outbox/")
	if s.Scheme() != "gs" || s.Bucket() != "blobs" || s.Prefix() != "outbox/" {
		t.Errorf("scheme %q, bucket %q, prefix %q", s.Scheme(), s.Bucket(), s.Prefix())
	}
	data := bytes.Repeat([]byte("\x00\xff17MiB\n"), 17<<20/8)
	ref := claimcheck.NewRef(s.Scheme(), id, data)
	if err := s.Put(ctx, ref.Key, data); err != nil {
		t.Fatal(err)
	}
	got, err := claimcheck.Fetch(ctx, s, ref)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Fetch: %d bytes, %v", len(got), err)
	}
	if o, err := srv.GetObject("blobs", "outbox/"+ref.Key); err != nil || !bytes.Equal(o.Content, data) || o.ContentType != "application/octet-stream" {
		t.Fatalf("the object under the prefix: %d bytes, content type %q, %v", len(o.Content), o.ContentType, err)
	}
	small := claimcheck.NewRef(s.Scheme(), "second", []byte("2"))
	if err := s.Put(ctx, small.Key, []byte("2")); err != nil {
		t.Fatal(err)
	}
	if got, err := claimcheck.Fetch(ctx, s, small); err != nil || string(got) != "2" {
		t.Fatalf("Fetch of the small blob: %q, %v", got, err)
	}
	// Objects outside the store's names are never listed.
	write(t, c, "blobs", "outbox/not a key", []byte("x"))
	write(t, c, "blobs", "outbox/sub/deeper", []byte("x"))
	write(t, c, "blobs", "elsewhere", []byte("x"))
	if ks, want := keys(t, s, time.Now().Add(time.Hour)), []string{ref.Key, small.Key}; !slices.Equal(ks, want) {
		t.Errorf("listed %v, want %v", ks, want)
	}
	if ks := keys(t, s, time.Now().Add(-time.Hour)); len(ks) != 0 {
		t.Errorf("blobs older than an hour: %v", ks)
	}
	if err := s.Delete(ctx, ref.Key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, ref.Key); !errors.Is(err, claimcheck.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	if _, err := claimcheck.Fetch(ctx, s, ref); !errors.Is(err, claimcheck.ErrNotFound) {
		t.Errorf("Fetch after Delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, ref.Key); err != nil {
		t.Errorf("Delete of a missing object: %v", err)
	}
	if ks, want := keys(t, s, time.Now().Add(time.Hour)), []string{small.Key}; !slices.Equal(ks, want) {
		t.Errorf("listed after Delete %v, want %v", ks, want)
	}
	for _, bad := range []string{"../escape", "", ".hidden", "a/b"} {
		if err := s.Put(ctx, bad, data); !errors.Is(err, claimcheck.ErrInvalidKey) {
			t.Errorf("Put(%q): %v, want ErrInvalidKey", bad, err)
		}
		if _, err := s.Get(ctx, bad); !errors.Is(err, claimcheck.ErrInvalidKey) {
			t.Errorf("Get(%q): %v, want ErrInvalidKey", bad, err)
		}
		if err := s.Delete(ctx, bad); !errors.Is(err, claimcheck.ErrInvalidKey) {
			t.Errorf("Delete(%q): %v, want ErrInvalidKey", bad, err)
		}
	}
}

// TestStoreWholeBucket: without a prefix the store's objects are the
// bucket's, and List takes every object whose name is a key.
func TestStoreWholeBucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := client(t, fakeGCS(t))
	s := newStore(t, c, "blobs", "")
	ref := claimcheck.NewRef(s.Scheme(), id, []byte("whole"))
	if err := s.Put(ctx, ref.Key, []byte("whole")); err != nil {
		t.Fatal(err)
	}
	if got := read(t, c, "blobs", ref.Key); string(got) != "whole" {
		t.Errorf("object %q", got)
	}
	write(t, c, "blobs", "dir/nested", []byte("x"))
	if ks, want := keys(t, s, time.Now().Add(time.Hour)), []string{ref.Key}; !slices.Equal(ks, want) {
		t.Errorf("listed %v, want %v", ks, want)
	}
}

// TestListOlderThan: List takes the objects written before its bound
// only, and fn may delete the key it is given; fn's error ends List.
func TestListOlderThan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := fakeGCS(t)
	s := newStore(t, client(t, srv), "blobs", "p/")
	now := time.Now()
	for name, age := range map[string]time.Duration{"old1": 3 * time.Hour, "old2": 2 * time.Hour, "new": time.Minute} {
		srv.CreateObject(fakestorage.Object{
			ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "blobs", Name: "p/" + name, Created: now.Add(-age), Updated: now.Add(-age)},
			Content:     []byte(name),
		})
	}
	if ks, want := keys(t, s, now.Add(-time.Hour)), []string{"old1", "old2"}; !slices.Equal(ks, want) {
		t.Fatalf("older than an hour: %v, want %v", ks, want)
	}
	err := s.List(ctx, now.Add(-time.Hour), func(k string) error { return s.Delete(ctx, k) })
	if err != nil {
		t.Fatal(err)
	}
	if ks, want := keys(t, s, now.Add(time.Hour)), []string{"new"}; !slices.Equal(ks, want) {
		t.Errorf("left %v, want %v", ks, want)
	}
	stop := errors.New("stop")
	n := 0
	if err := s.List(ctx, now.Add(time.Hour), func(string) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Errorf("List with fn failing: %v after %d calls, want stop after 1", err, n)
	}
}

// TestPutNoOverwrite: a second Put of the same blob (a retry, a repeated
// Enqueue) is success; a Put of other bytes under a key that holds a blob
// is refused and leaves the blob as it was.
func TestPutNoOverwrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := client(t, fakeGCS(t))
	s := newStore(t, c, "blobs", "cc/")
	data := []byte("the first blob, kept")
	ref := claimcheck.NewRef(s.Scheme(), id, data)
	if err := s.Put(ctx, ref.Key, data); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, ref.Key, data); err != nil {
		t.Errorf("Put of the same blob again: %v", err)
	}
	for _, other := range [][]byte{[]byte("the other blob, refused"), []byte("the first blob, KEPT"), nil} {
		err := s.Put(ctx, ref.Key, other)
		if err == nil || !strings.Contains(err.Error(), "another blob") || strings.Contains(err.Error(), "\n") {
			t.Errorf("Put of %q over another blob: %v; want one line saying another blob", other, err)
		}
	}
	if got, err := claimcheck.Fetch(ctx, s, ref); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the blob after refused Puts: %q, %v", got, err)
	}
	// The same bytes written by another program (no precondition, its own
	// upload) are the same blob too.
	other := claimcheck.NewRef(s.Scheme(), "0190a7c4-2222-7000-8000-000000000002", []byte("written elsewhere"))
	write(t, c, "blobs", "cc/"+other.Key, []byte("written elsewhere"))
	if err := s.Put(ctx, other.Key, []byte("written elsewhere")); err != nil {
		t.Errorf("Put of the bytes another program wrote: %v", err)
	}
}

// TestFetchMismatch: a blob that is not the one its reference names
// (replaced, truncated, grown) is claimcheck.ErrMismatch through Fetch; a
// reference to another kind of store is ErrWrongStore.
func TestFetchMismatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := client(t, fakeGCS(t))
	s := newStore(t, c, "blobs", "cc/")
	data := []byte(`{"document":"the payload as enqueued"}`)
	ref := claimcheck.NewRef(s.Scheme(), id, data)
	for name, stored := range map[string][]byte{
		"replaced, same size": bytes.ToUpper(data),
		"truncated":           data[:10],
		"grown":               append(slices.Clone(data), '!'),
	} {
		write(t, c, "blobs", "cc/"+ref.Key, stored)
		if _, err := claimcheck.Fetch(ctx, s, ref); !errors.Is(err, claimcheck.ErrMismatch) {
			t.Errorf("%s: Fetch %v, want ErrMismatch", name, err)
		}
	}
	write(t, c, "blobs", "cc/"+ref.Key, data)
	if got, err := claimcheck.Fetch(ctx, s, ref); err != nil || !bytes.Equal(got, data) {
		t.Errorf("Fetch of the blob as referenced: %q, %v", got, err)
	}
	s3ref := ref
	s3ref.Scheme = "s3"
	if _, err := claimcheck.Fetch(ctx, s, s3ref); !errors.Is(err, claimcheck.ErrWrongStore) {
		t.Errorf("Fetch of an s3 reference: %v, want ErrWrongStore", err)
	}
	h := map[string]string{}
	ref.SetHeaders(h)
	if h[claimcheck.HeaderRef] != "gs:"+ref.Key {
		t.Errorf("reference header %q", h[claimcheck.HeaderRef])
	}
	back, ok, err := claimcheck.ParseHeaders(h)
	if !ok || err != nil || back != ref {
		t.Errorf("ParseHeaders of a gs reference: %+v %v %v", back, ok, err)
	}
}

// TestMissingBucket: a bucket that does not exist is an error of its own
// for Get, not claimcheck.ErrNotFound (which makes the relay give its
// message up), and Put fails.
func TestMissingBucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t, client(t, fakeGCS(t)), "no-such-bucket", "")
	_, err := s.Get(ctx, id)
	if err == nil || errors.Is(err, claimcheck.ErrNotFound) || !strings.Contains(err.Error(), `bucket "no-such-bucket" does not exist`) {
		t.Errorf("Get from a missing bucket: %v", err)
	}
	if err := s.Put(ctx, id, []byte("x")); err == nil || !strings.Contains(err.Error(), `bucket "no-such-bucket" does not exist`) || strings.Contains(err.Error(), "\n") {
		t.Errorf("Put into a missing bucket: %v; want a one-line error", err)
	}
	if err := s.List(ctx, time.Now(), func(string) error { return nil }); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("List of a missing bucket: %v; want a one-line error", err)
	}
}

// TestStoreUnreachable: a server that does not answer is an error that
// is neither ErrNotFound (the relay then retries, uncharged) nor a panic.
func TestStoreUnreachable(t *testing.T) {
	t.Parallel()
	c, err := storage.NewClient(context.Background(),
		option.WithEndpoint("http://127.0.0.1:1/storage/v1/"), option.WithoutAuthentication(), storage.WithJSONReads())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetRetry(storage.WithPolicy(storage.RetryNever))
	s := newStore(t, c, "blobs", "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.Get(ctx, "k"); err == nil || errors.Is(err, claimcheck.ErrNotFound) || strings.Contains(err.Error(), "\n") {
		t.Errorf("Get from no server: %v", err)
	}
	if err := s.Put(ctx, "k", []byte("x")); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("Put to no server: %v", err)
	}
}

// TestNew: New refuses what names no bucket or prefix.
func TestNew(t *testing.T) {
	t.Parallel()
	c := client(t, fakeGCS(t))
	if _, err := outboxgcs.New(nil, &outboxgcs.Config{Bucket: "b"}); err == nil {
		t.Error("New with no client: no error")
	}
	for _, cfg := range []*outboxgcs.Config{nil, {}, {Bucket: "a/b"}, {Bucket: "b", Prefix: "/abs"}, {Bucket: "b", Prefix: strings.Repeat("p", 600)}} {
		if _, err := outboxgcs.New(c, cfg); err == nil {
			t.Errorf("New(%+v): no error", cfg)
		}
	}
}
