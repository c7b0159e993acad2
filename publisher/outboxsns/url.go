package outboxsns

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/internal/awswire"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// Scheme is the URL scheme of the destination.
const Scheme = "sns"

// URL parameters.
const (
	ParamRegion   = awswire.ParamRegion
	ParamEndpoint = awswire.ParamEndpoint
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
	// WithRegion("") leaves the region to the SDK.
	awsCfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion(region))
	if err != nil {
		return nil, fmt.Errorf("outboxsns: %s: loading the AWS configuration: %s", awswire.Redacted(u), awswire.OneLine(err.Error()))
	}
	if awsCfg.Region == "" && arn != "" {
		awsCfg.Region = strings.Split(arn, ":")[3]
	}
	if awsCfg.Region == "" {
		return nil, fmt.Errorf("outboxsns: %s: no AWS region: add ?%s= or set AWS_REGION", awswire.Redacted(u), ParamRegion)
	}
	client := sns.NewFromConfig(awsCfg, func(o *sns.Options) {
		if endpoint != "" {
			o.BaseEndpoint = &endpoint
		}
	})
	p, err := New(client, &Config{TopicARN: arn, CloudEvents: ce})
	if err != nil {
		return nil, fmt.Errorf("%v (destination %s)", err, awswire.Redacted(u))
	}
	return p, nil
}

// parseURL reads an sns: URL: the topic ARN ("" when the destinations
// name it), the region and endpoint asked for ("" for the SDK's).
func parseURL(u *url.URL) (arn, region, endpoint string, err error) {
	bad := awswire.URLErrors("outboxsns", u)
	if err := awswire.CheckURL("outboxsns", Scheme, u, bad); err != nil {
		return "", "", "", err
	}
	_, region, endpoint, err = awswire.Query(u, params, bad)
	if err != nil {
		return "", "", "", err
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
