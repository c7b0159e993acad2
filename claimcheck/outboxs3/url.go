package outboxs3

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// URL parameters of OpenURL.
const (
	// ParamRegion names the bucket's region; defaults to the AWS
	// configuration's (AWS_REGION, the profile).
	ParamRegion = "region"
	// ParamEndpoint is the base URL of an S3-compatible server (MinIO, a
	// local emulator); defaults to AWS's endpoints (or AWS_ENDPOINT_URL_S3).
	ParamEndpoint = "endpoint"
	// ParamPathStyle, "true", addresses the bucket in the path instead of
	// the host name, as most S3-compatible servers want.
	ParamPathStyle = "path_style"
)

// OpenURL returns the store that s3://BUCKET[/PREFIX][?region=R]
// [&endpoint=URL][&path_style=true] names, with a client configured the
// AWS SDK's way (config.LoadDefaultConfig: the environment, the shared
// profile, web identity, the ECS task or EC2 instance role). PREFIX, when
// given, ends with "/" added when missing. Errors are one line and hold no
// secret; the URL must carry none (no user:password@).
func OpenURL(ctx context.Context, u *url.URL) (*Store, error) {
	if !strings.EqualFold(u.Scheme, Scheme) {
		return nil, fmt.Errorf("outboxs3: scheme %q: want s3://BUCKET[/PREFIX]", u.Scheme)
	}
	if u.User != nil {
		return nil, errors.New("outboxs3: the URL must hold no credentials: they come from the AWS configuration (environment, profile, role)")
	}
	bucket := u.Host
	if bucket == "" {
		return nil, errors.New("outboxs3: no bucket: want s3://BUCKET[/PREFIX]")
	}
	prefix := strings.TrimPrefix(u.Path, "/")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	q := u.Query()
	for k, v := range q {
		if !slices.Contains([]string{ParamRegion, ParamEndpoint, ParamPathStyle}, k) {
			return nil, fmt.Errorf("outboxs3: unknown parameter %q (want %s, %s or %s)", k, ParamRegion, ParamEndpoint, ParamPathStyle)
		}
		if len(v) > 1 {
			return nil, fmt.Errorf("outboxs3: parameter %q given more than once", k)
		}
	}
	pathStyle := false
	if v := q.Get(ParamPathStyle); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("outboxs3: %s=%q: want true or false", ParamPathStyle, v)
		}
		pathStyle = b
	}
	endpoint := q.Get(ParamEndpoint)
	if endpoint != "" {
		e, err := url.Parse(endpoint)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" || e.User != nil {
			return nil, fmt.Errorf("outboxs3: %s: want http(s)://HOST[:PORT] without credentials", ParamEndpoint)
		}
	}
	var opts []func(*config.LoadOptions) error
	if r := q.Get(ParamRegion); r != "" {
		opts = append(opts, config.WithRegion(r))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("outboxs3: AWS configuration: %v", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("outboxs3: no region: give %s= or set AWS_REGION", ParamRegion)
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
		o.UsePathStyle = pathStyle
		// The store checks each blob's SHA-256 itself (claimcheck.Fetch):
		// the SDK's note that a server sent no checksum is noise.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	return New(client, bucket, &Options{Prefix: prefix})
}
