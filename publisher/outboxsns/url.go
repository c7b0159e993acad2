package outboxsns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// Scheme is the URL scheme of the destination.
const Scheme = "sns"

// URL parameters.
const (
	ParamRegion   = "region"
	ParamEndpoint = "endpoint"
)

var params = []string{ParamRegion, ParamEndpoint}

// OpenURL opens the destination a URL names:
//
//	sns:arn:aws:sns:REGION:ACCOUNT:TOPIC[?region=R&endpoint=E]   one topic
//	sns:///arn:aws:sns:REGION:ACCOUNT:TOPIC[?…]                  the same, written as a path
//	sns://?region=R[&endpoint=E]                                 each message to the topic ARN its destination is
//
// (sns://arn:aws:sns:… cannot be used: URL parsers read the ARN's colons
// as a host and port.) The client is built the SDK's way
// (config.LoadDefaultConfig: the environment, the shared config and
// credentials files, web identity, the instance or task role). region
// defaults to the SDK's (AWS_REGION, the profile), else the topic ARN's;
// endpoint overrides the service endpoint (AWS_ENDPOINT_URL_SNS works
// too). ce, when not nil, sends CloudEvents in binary mode (ce-
// attributes). log is not used yet; nil is fine.
func OpenURL(u *url.URL, ce *outboxce.Format, log *slog.Logger) (publisher.Publisher, error) {
	_ = log
	arn, region, endpoint, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	var loadOpts []func(*config.LoadOptions) error
	if region != "" {
		loadOpts = append(loadOpts, config.WithRegion(region))
	}
	awsCfg, err := config.LoadDefaultConfig(context.Background(), loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("outboxsns: %s: loading the AWS configuration: %s", redacted(u), oneLine(err.Error()))
	}
	if awsCfg.Region == "" && arn != "" {
		awsCfg.Region = strings.Split(arn, ":")[3]
	}
	if awsCfg.Region == "" {
		return nil, fmt.Errorf("outboxsns: %s: no AWS region: add ?%s= or set AWS_REGION", redacted(u), ParamRegion)
	}
	client := sns.NewFromConfig(awsCfg, func(o *sns.Options) {
		if endpoint != "" {
			o.BaseEndpoint = &endpoint
		}
	})
	p, err := New(client, &Config{TopicARN: arn, CloudEvents: ce})
	if err != nil {
		return nil, fmt.Errorf("%v (destination %s)", err, redacted(u))
	}
	return p, nil
}

// parseURL reads an sns: URL: the topic ARN ("" when the destinations
// name it), the region and endpoint asked for ("" for the SDK's).
func parseURL(u *url.URL) (arn, region, endpoint string, err error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("outboxsns: destination %s: "+format, append([]any{redacted(u)}, a...)...)
	}
	if u == nil {
		return "", "", "", errors.New("outboxsns: nil URL")
	}
	if u.Scheme != Scheme {
		return "", "", "", bad("scheme %q is not %s", u.Scheme, Scheme)
	}
	if u.User != nil {
		return "", "", "", bad("credentials do not go in the URL: the SDK's chain provides them (environment, profile, role)")
	}
	q := u.Query()
	var unknown []string
	for k, vs := range q {
		if !slices.Contains(params, k) {
			unknown = append(unknown, strconv.Quote(k))
		} else if len(vs) > 1 {
			return "", "", "", bad("parameter %s given %d times", k, len(vs))
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return "", "", "", bad("unknown parameter %s (known: %s)", strings.Join(unknown, ", "), strings.Join(params, ", "))
	}
	region, endpoint = q.Get(ParamRegion), q.Get(ParamEndpoint)
	if endpoint != "" {
		e, err := url.Parse(endpoint)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
			return "", "", "", bad("%s=%q is not an http(s) URL", ParamEndpoint, endpoint)
		}
	}
	switch {
	case u.Opaque != "":
		arn = u.Opaque
	case u.Host != "":
		return "", "", "", bad("write the topic ARN as sns:arn:aws:sns:REGION:ACCOUNT:TOPIC or sns:///arn:…, or sns://?region=R to send to the ARN each destination is")
	default:
		arn = strings.TrimPrefix(u.Path, "/")
	}
	if arn != "" {
		if err := ValidTopicARN(arn); err != nil {
			return "", "", "", bad("%v", strings.TrimPrefix(err.Error(), "outboxsns: "))
		}
	}
	return arn, region, endpoint, nil
}

// redacted is u as errors show it: without user information.
func redacted(u *url.URL) string {
	if u == nil {
		return "<nil>"
	}
	c := *u
	c.User = nil
	return c.String()
}
