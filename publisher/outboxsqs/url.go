package outboxsqs

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/internal/awswire"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// Scheme is the URL scheme of the destination.
const Scheme = "sqs"

// URL parameters.
const (
	ParamRegion          = awswire.ParamRegion
	ParamEndpoint        = awswire.ParamEndpoint
	ParamQueueOwner      = "queue_owner"
	ParamMaxMessageBytes = "max_message_bytes"
)

var params = []string{ParamRegion, ParamEndpoint, ParamQueueOwner, ParamMaxMessageBytes}

// OpenURL opens the destination a URL names:
//
//	sqs://QUEUE-NAME[?region=R&endpoint=E]             one queue, by name (resolved with GetQueueUrl)
//	sqs://HOST/ACCOUNT-ID/QUEUE-NAME[?region=R&…]      one queue, by its URL (https://HOST/ACCOUNT-ID/QUEUE-NAME)
//	sqs://?region=R[&…]                                each message to the queue its destination names
//
// The client is built the SDK's way (config.LoadDefaultConfig: the
// environment, the shared config and credentials files, web identity,
// the instance or task role). region defaults to the SDK's (AWS_REGION,
// the profile) and, for a queue URL on amazonaws.com, to the URL's;
// endpoint overrides the service endpoint (AWS_ENDPOINT_URL_SQS works
// too); queue_owner is the account owning queues named by name;
// max_message_bytes is Config.MaxMessageBytes. ce, when not nil, sends
// CloudEvents in binary mode (ce- attributes). log receives debug lines;
// nil is slog.Default().
func OpenURL(u *url.URL, ce *outboxce.Format, log *slog.Logger) (publisher.Publisher, error) {
	cfg, region, endpoint, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	cfg.CloudEvents = ce
	cfg.Logger = log
	// WithRegion("") leaves the region to the SDK.
	awsCfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion(region))
	if err != nil {
		return nil, fmt.Errorf("outboxsqs: %s: loading the AWS configuration: %s", awswire.Redacted(u), awswire.OneLine(err.Error()))
	}
	if awsCfg.Region == "" {
		return nil, fmt.Errorf("outboxsqs: %s: no AWS region: add ?%s= or set AWS_REGION", awswire.Redacted(u), ParamRegion)
	}
	client := sqs.NewFromConfig(awsCfg, func(o *sqs.Options) {
		if endpoint != "" {
			o.BaseEndpoint = &endpoint
		}
	})
	p, err := New(client, cfg)
	if err != nil {
		return nil, fmt.Errorf("%v (destination %s)", err, awswire.Redacted(u))
	}
	return p, nil
}

// parseURL reads an sqs:// URL into a Config, the region it names or
// implies ("" for the SDK's) and the endpoint ("" for the SDK's).
func parseURL(u *url.URL) (cfg *Config, region, endpoint string, err error) {
	bad := awswire.URLErrors("outboxsqs", u)
	if err := awswire.CheckURL("outboxsqs", Scheme, u, bad); err != nil {
		return nil, "", "", err
	}
	if u.Opaque != "" {
		return nil, "", "", bad("write sqs://QUEUE-NAME, sqs://HOST/ACCOUNT-ID/QUEUE-NAME or sqs://?region=R")
	}
	q, region, endpoint, err := awswire.Query(u, params, bad)
	if err != nil {
		return nil, "", "", err
	}
	cfg = &Config{QueueOwner: q.Get(ParamQueueOwner)}
	if v := q.Get(ParamMaxMessageBytes); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxMessageBytesLimit {
			return nil, "", "", bad("%s=%q is not a number of bytes from 1 to %d", ParamMaxMessageBytes, v, MaxMessageBytesLimit)
		}
		cfg.MaxMessageBytes = n
	}
	path := strings.Trim(u.Path, "/")
	switch {
	case u.Host == "" && path == "":
		// Each message to the queue its destination names.
	case path == "":
		if err := ValidQueueName(u.Host); err != nil {
			return nil, "", "", bad("%v", strings.TrimPrefix(err.Error(), "outboxsqs: "))
		}
		cfg.QueueName = u.Host
	default:
		parts := strings.Split(path, "/")
		if u.Host == "" || len(parts) != 2 || parts[0] == "" {
			return nil, "", "", bad("a queue URL is sqs://HOST/ACCOUNT-ID/QUEUE-NAME")
		}
		if err := ValidQueueName(parts[1]); err != nil {
			return nil, "", "", bad("%v", strings.TrimPrefix(err.Error(), "outboxsqs: "))
		}
		cfg.QueueURL = "https://" + u.Host + "/" + path
		if region == "" {
			region = regionOf(u.Hostname())
		}
	}
	return cfg, region, endpoint, nil
}

// regionOf is the region in an SQS endpoint host name
// (sqs.REGION.amazonaws.com, REGION.queue.amazonaws.com), "" if none.
func regionOf(host string) string {
	labels := strings.Split(host, ".")
	if len(labels) < 4 || !strings.HasSuffix(host, ".amazonaws.com") && !strings.HasSuffix(host, ".amazonaws.com.cn") {
		return ""
	}
	switch {
	case labels[0] == "sqs":
		return labels[1]
	case labels[1] == "queue":
		return labels[0]
	}
	return ""
}
