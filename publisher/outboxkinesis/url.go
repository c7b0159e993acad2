package outboxkinesis

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// Scheme is the URL scheme of the destination.
const Scheme = "kinesis"

// URL parameters of OpenURL:
//
//	kinesis://STREAM[?region=R&endpoint=E]
//	kinesis://?stream_arn=ARN[&region=R&endpoint=E]
//	kinesis://[?region=R&endpoint=E]      the message's destination names the stream
const (
	// ParamRegion is the AWS region; defaults to the SDK's (AWS_REGION,
	// the shared config's profile).
	ParamRegion = "region"
	// ParamEndpoint overrides the service endpoint (a local server, a VPC
	// endpoint); AWS_ENDPOINT_URL_KINESIS works as well.
	ParamEndpoint = "endpoint"
	// ParamStreamARN names the stream by ARN instead of the host.
	ParamStreamARN = "stream_arn"
)

// OpenURL builds a Publisher from a kinesis:// destination URL, loading
// the AWS configuration the SDK's default way (environment, shared
// config and credentials files, web identity, container and instance
// roles). ce != nil (format=cloudevents) writes every record as a
// CloudEvent in the JSON event format. Errors are one line and carry no
// secret.
func OpenURL(u *url.URL, ce *outboxce.Format, log *slog.Logger) (publisher.Publisher, error) {
	if u == nil {
		return nil, fmt.Errorf("outboxkinesis: nil URL")
	}
	fail := func(format string, args ...any) (publisher.Publisher, error) {
		return nil, fmt.Errorf("destination %s: "+format, append([]any{u.Redacted()}, args...)...)
	}
	if !strings.EqualFold(u.Scheme, Scheme) {
		return fail("not a %s:// URL", Scheme)
	}
	if u.Opaque != "" {
		return fail("write %s://STREAM (with two slashes)", Scheme)
	}
	if u.User != nil {
		return fail("credentials do not go in the URL: the AWS SDK reads them from its environment, shared files or role")
	}
	if u.Path != "" && u.Path != "/" {
		return fail("the stream is the host (%s://STREAM); the URL takes no path (%q)", Scheme, u.Path)
	}
	if u.Fragment != "" {
		return fail("the URL takes no fragment")
	}
	q := u.Query()
	var unknown []string
	for k, vs := range q {
		switch k {
		case ParamRegion, ParamEndpoint, ParamStreamARN:
			if len(vs) > 1 {
				return fail("parameter %q given more than once", k)
			}
		default:
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fail("unknown parameter(s) %s (known: %s, %s, %s, and format, ce_source)", strings.Join(unknown, ", "), ParamRegion, ParamEndpoint, ParamStreamARN)
	}
	cfg := &Config{Stream: u.Host, StreamARN: q.Get(ParamStreamARN), CloudEvents: ce}
	if u.Port() != "" {
		return fail("the host is the stream name and takes no port; the endpoint goes in ?%s=", ParamEndpoint)
	}
	endpoint := q.Get(ParamEndpoint)
	if endpoint != "" {
		e, err := url.Parse(endpoint)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
			return fail("%s=%q: want an http:// or https:// URL", ParamEndpoint, endpoint)
		}
		if e.User != nil {
			return fail("%s: credentials do not go in the endpoint URL", ParamEndpoint)
		}
	}
	var opts []func(*config.LoadOptions) error
	if r := q.Get(ParamRegion); r != "" {
		opts = append(opts, config.WithRegion(r))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return fail("loading the AWS configuration: %s", oneLine(err.Error()))
	}
	if awsCfg.Region == "" {
		return fail("no AWS region: add ?%s= or set AWS_REGION", ParamRegion)
	}
	// The HTTP transport as the configuration set it up (a CA bundle
	// included), kept so that Close can let its connections go.
	closeIdle := func() {}
	if b, ok := awsCfg.HTTPClient.(*awshttp.BuildableClient); ok {
		tr := b.GetTransport()
		awsCfg.HTTPClient = &http.Client{Transport: tr, Timeout: b.GetTimeout()}
		closeIdle = tr.CloseIdleConnections
	}
	client := kinesis.NewFromConfig(awsCfg, func(o *kinesis.Options) {
		if endpoint != "" {
			o.BaseEndpoint = &endpoint
		}
	})
	p, err := New(client, cfg)
	if err != nil {
		return fail("%s", strings.TrimPrefix(err.Error(), "outboxkinesis: "))
	}
	p.closeIdle = closeIdle
	if log != nil {
		log.Debug("outboxkinesis: destination opened", "stream", cfg.Stream, "stream_arn", cfg.StreamARN, "region", awsCfg.Region, "format", ce.String())
	}
	return p, nil
}
