package outboxgcs

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/txoutbox/outbox/claimcheck"
)

// Scheme names the store in claim-check references.
const Scheme = "gs"

// maxPrefix bounds Config.Prefix: an object name is at most 1024 bytes,
// and a key up to claimcheck.MaxKeyLen follows the prefix.
const maxPrefix = 512

// Config names where a Store keeps its blobs.
type Config struct {
	// Bucket is the name of an existing bucket. Required.
	Bucket string
	// Prefix starts the name of every object the store writes, e.g.
	// "outbox/": the store lists and sweeps only objects under it.
	// Defaults to "": the whole bucket.
	Prefix string
}

// Store is a claimcheck.Store over one bucket (and prefix) of Cloud
// Storage.
type Store struct {
	client *storage.Client
	bucket *storage.BucketHandle
	name   string
	prefix string
	// owned: OpenURL made the client, and Close closes it.
	owned bool
}

var _ claimcheck.Store = (*Store)(nil)

// castagnoli is the CRC32C table, the checksum Cloud Storage keeps.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// New returns the store over cfg.Bucket through client.
func New(client *storage.Client, cfg *Config) (*Store, error) {
	if client == nil {
		return nil, errors.New("outboxgcs: New: nil client")
	}
	if cfg == nil || cfg.Bucket == "" {
		return nil, errors.New("outboxgcs: New: no bucket name (Config.Bucket)")
	}
	if strings.ContainsAny(cfg.Bucket, "/\r\n") {
		return nil, fmt.Errorf("outboxgcs: New: Config.Bucket %q: want a bucket name, without '/'", cfg.Bucket)
	}
	if strings.HasPrefix(cfg.Prefix, "/") || len(cfg.Prefix) > maxPrefix || strings.ContainsAny(cfg.Prefix, "\r\n") {
		return nil, fmt.Errorf("outboxgcs: New: Config.Prefix %q: want no leading '/', no line break and at most %d bytes", cfg.Prefix, maxPrefix)
	}
	return &Store{client: client, bucket: client.Bucket(cfg.Bucket), name: cfg.Bucket, prefix: cfg.Prefix}, nil
}

// Scheme is "gs".
func (s *Store) Scheme() string { return Scheme }

// Bucket is the bucket's name.
func (s *Store) Bucket() string { return s.name }

// Prefix is the prefix of the store's object names.
func (s *Store) Prefix() string { return s.prefix }

// Close closes the client when OpenURL made it; a store from New leaves
// the client to its owner.
func (s *Store) Close() error {
	if !s.owned {
		return nil
	}
	return s.client.Close()
}

// Put writes data as the object of key, on the condition that no object
// of that name exists yet; Cloud Storage makes an object durable before
// it answers and never shows a partial one. The CRC32C of data goes with
// the upload, so that the service refuses bytes damaged on the way.
//
// An object already under key (a retried upload that went through, a
// second Put of the same blob) is success when it holds data: the same size
// and CRC32C, and the same MD5 when the service keeps one. Another object
// is an error: the store never replaces a blob.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	if err := claimcheck.CheckKey(key); err != nil {
		return err
	}
	obj := s.bucket.Object(s.prefix + key)
	crc := crc32.Checksum(data, castagnoli)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := obj.If(storage.Conditions{DoesNotExist: true}).NewWriter(wctx)
	w.ContentType = "application/octet-stream"
	w.CRC32C = crc
	w.SendCRC32C = true
	_, err := w.Write(data)
	if err != nil {
		cancel() // abandons the upload
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		return nil
	}
	if !preconditionFailed(err) {
		var e *googleapi.Error
		if errors.As(err, &e) && e.Code == http.StatusNotFound {
			return fail("put %s: bucket %q does not exist: %w", key, s.name, err)
		}
		return fail("put %s: %w", key, err)
	}
	attrs, aerr := obj.Attrs(ctx)
	if aerr != nil {
		return fail("put %s: an object exists under the key and its attributes could not be read: %w", key, aerr)
	}
	if attrs.Size == int64(len(data)) && attrs.CRC32C == crc && (len(attrs.MD5) == 0 || md5Equal(attrs.MD5, data)) {
		return nil
	}
	return fail("put %s: another blob (%d bytes) is already stored under the key; the store never replaces one", key, attrs.Size)
}

// Get reads the object of key; a missing one is claimcheck.ErrNotFound.
// A missing bucket is not (Cloud Storage answers 404 for both): it is a
// configuration error, after which the blob may still be there.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	if err := claimcheck.CheckKey(key); err != nil {
		return nil, err
	}
	r, err := s.bucket.Object(s.prefix + key).NewReader(ctx)
	if err != nil {
		if errors.Is(err, storage.ErrObjectNotExist) {
			return nil, s.missing(ctx, key)
		}
		return nil, fail("get %s: %w", key, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fail("get %s: %w", key, err)
	}
	return b, nil
}

// missing tells a missing object (claimcheck.ErrNotFound) from a missing
// bucket after a 404, by listing the object's name: a listing is
// ErrBucketNotExist for a bucket that is not there.
func (s *Store) missing(ctx context.Context, key string) error {
	it := s.bucket.Objects(ctx, &storage.Query{Prefix: s.prefix + key})
	it.PageInfo().MaxSize = 1
	_, err := it.Next()
	switch {
	case err == nil || errors.Is(err, iterator.Done):
		return fmt.Errorf("%w: %s", claimcheck.ErrNotFound, key)
	case errors.Is(err, storage.ErrBucketNotExist):
		return fail("get %s: bucket %q does not exist", key, s.name)
	default:
		return fail("get %s: not found, and the bucket could not be listed to tell a missing object from a missing bucket: %w", key, err)
	}
}

// Delete removes the object of key; a missing one is no error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := claimcheck.CheckKey(key); err != nil {
		return err
	}
	err := s.bucket.Object(s.prefix + key).Delete(ctx)
	if err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
		return fail("delete %s: %w", key, err)
	}
	return nil
}

// List calls fn with the key of every object under the prefix created
// before olderThan whose name past the prefix is a key; others are left
// alone.
func (s *Store) List(ctx context.Context, olderThan time.Time, fn func(key string) error) error {
	q := &storage.Query{Prefix: s.prefix}
	if err := q.SetAttrSelection([]string{"Name", "Created", "Updated"}); err != nil {
		return fail("list: %w", err)
	}
	it := s.bucket.Objects(ctx, q)
	for {
		o, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return nil
		}
		if err != nil {
			return fail("list: %w", err)
		}
		written := o.Created
		if written.IsZero() {
			written = o.Updated
		}
		key, ok := strings.CutPrefix(o.Name, s.prefix)
		if !ok || !claimcheck.ValidKey(key) || written.IsZero() || !written.Before(olderThan) {
			continue
		}
		if err := fn(key); err != nil {
			return err
		}
	}
}

// preconditionFailed reports whether err is the answer to a write whose
// precondition (no object of that name) did not hold.
func preconditionFailed(err error) bool {
	var e *googleapi.Error
	if errors.As(err, &e) {
		return e.Code == http.StatusPreconditionFailed
	}
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.FailedPrecondition
}

func md5Equal(sum, data []byte) bool {
	h := md5.Sum(data)
	return bytes.Equal(sum, h[:])
}

// fail is an error of the store: "outboxgcs: " and the message, on one
// line (the service's answers can span several), still wrapping the
// causes for errors.Is.
func fail(format string, args ...any) error {
	return &lineError{err: fmt.Errorf("outboxgcs: "+format, args...)}
}

// lineError renders err on one line, at most maxErrorLen bytes.
type lineError struct{ err error }

const maxErrorLen = 1024

func (e *lineError) Error() string {
	s := strings.Join(strings.Fields(e.err.Error()), " ")
	if len(s) > maxErrorLen {
		n := maxErrorLen
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…"
	}
	return s
}

func (e *lineError) Unwrap() error { return e.err }
