package outboxs3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/txoutbox/outbox/claimcheck"
)

// Scheme names the store in claim-check references.
const Scheme = "s3"

// Options configures a Store. The zero value is valid.
type Options struct {
	// Prefix starts the name of every object the store writes, e.g.
	// "outbox/": the store lists and sweeps only objects under it.
	// Defaults to "": the whole bucket.
	Prefix string
}

// Store is a claimcheck.Store over one bucket (and prefix) of S3.
type Store struct {
	client *s3.Client
	bucket string
	prefix string
}

var _ claimcheck.Store = (*Store)(nil)

// New returns the store over bucket through client. opts may be nil.
func New(client *s3.Client, bucket string, opts *Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("outboxs3: New: nil client")
	}
	if bucket == "" {
		return nil, errors.New("outboxs3: New: empty bucket name")
	}
	s := &Store{client: client, bucket: bucket}
	if opts != nil {
		if strings.HasPrefix(opts.Prefix, "/") || len(opts.Prefix) > 512 {
			return nil, fmt.Errorf("outboxs3: Options.Prefix %q: want no leading '/' and at most 512 bytes", opts.Prefix)
		}
		s.prefix = opts.Prefix
	}
	return s, nil
}

// Scheme is "s3".
func (s *Store) Scheme() string { return Scheme }

// Put writes data as the object of key. S3 makes a written object
// durable before it answers, and never shows a partial one.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	if err := claimcheck.CheckKey(key); err != nil {
		return err
	}
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(s.prefix + key),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		ContentType:   aws.String("application/octet-stream"),
	})
	if err != nil {
		return fmt.Errorf("outboxs3: put %s: %w", key, err)
	}
	return nil
}

// Get reads the object of key; a missing one is claimcheck.ErrNotFound.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	if err := claimcheck.CheckKey(key); err != nil {
		return nil, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key)})
	if err != nil {
		if notFound(err) {
			return nil, fmt.Errorf("%w: %s", claimcheck.ErrNotFound, key)
		}
		return nil, fmt.Errorf("outboxs3: get %s: %w", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("outboxs3: get %s: %w", key, err)
	}
	return b, nil
}

// Delete removes the object of key; a missing one is no error.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := claimcheck.CheckKey(key); err != nil {
		return err
	}
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(s.prefix + key)})
	if err != nil && !notFound(err) {
		return fmt.Errorf("outboxs3: delete %s: %w", key, err)
	}
	return nil
}

// List calls fn with the key of every object under the prefix last
// modified before olderThan whose name past the prefix is a key; others
// are left alone.
func (s *Store) List(ctx context.Context, olderThan time.Time, fn func(key string) error) error {
	pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(s.prefix)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("outboxs3: list: %w", err)
		}
		for _, o := range page.Contents {
			key, ok := strings.CutPrefix(aws.ToString(o.Key), s.prefix)
			if !ok || !claimcheck.ValidKey(key) || o.LastModified == nil || !o.LastModified.Before(olderThan) {
				continue
			}
			if err := fn(key); err != nil {
				return err
			}
		}
	}
	return nil
}

// notFound reports whether err says the object does not exist.
func notFound(err error) bool {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) && (api.ErrorCode() == "NoSuchKey" || api.ErrorCode() == "NotFound") {
		return true
	}
	var re *awshttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound
}
