package outboxsqs

import (
	"net/url"
	"strings"
	"testing"
)

// TestParseURL: each URL form, and the errors of bad ones on one line
// naming what is wrong.
func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url                      string
		queueURL, name, region   string
		endpoint, owner, errSays string
		maxBytes                 int
	}{
		{url: "sqs://?region=eu-west-1", region: "eu-west-1"},
		{url: "sqs://orders?region=eu-west-1&endpoint=http://127.0.0.1:14566", name: "orders", region: "eu-west-1", endpoint: "http://127.0.0.1:14566"},
		{url: "sqs://orders.fifo", name: "orders.fifo"},
		{url: "sqs://sqs.eu-west-1.amazonaws.com/123456789012/orders", queueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/orders", region: "eu-west-1"},
		{url: "sqs://eu-central-1.queue.amazonaws.com/123456789012/orders.fifo", queueURL: "https://eu-central-1.queue.amazonaws.com/123456789012/orders.fifo", region: "eu-central-1"},
		{url: "sqs://sqs.eu-west-1.amazonaws.com/123456789012/orders?region=us-east-1", queueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/orders", region: "us-east-1"},
		{url: "sqs://127.0.0.1:14566/000000000000/orders?endpoint=http://127.0.0.1:14566", queueURL: "https://127.0.0.1:14566/000000000000/orders", endpoint: "http://127.0.0.1:14566"},
		{url: "sqs://?queue_owner=123456789012&max_message_bytes=1048576", owner: "123456789012", maxBytes: 1048576},
		{url: "sqs://orders?regoin=x&foo=1", errSays: `unknown parameter "foo", "regoin"`},
		{url: "sqs://key:secret@orders", errSays: "credentials do not go in the URL"},
		{url: "sqs:orders", errSays: "write sqs://QUEUE-NAME"},
		{url: "sqs://orders?endpoint=localhost:4566", errSays: "not an http(s) URL"},
		{url: "sqs://orders?region=a&region=b", errSays: "given 2 times"},
		{url: "sqs://orders?max_message_bytes=2000000", errSays: "max_message_bytes"},
		{url: "sqs://host/123/orders/extra", errSays: "sqs://HOST/ACCOUNT-ID/QUEUE-NAME"},
		{url: "sqs://host/123/orders.created", errSays: "cannot be a queue name"},
		{url: "sqs://orders_v2.created", errSays: "cannot be a queue name"},
		{url: "sns://orders", errSays: "is not sqs"},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		cfg, region, endpoint, err := parseURL(u)
		if tc.errSays != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errSays) || strings.Contains(err.Error(), "secret") || strings.ContainsAny(err.Error(), "\r\n") {
				t.Errorf("%s: error %v, want one saying %q (and no secret)", tc.url, err, tc.errSays)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if cfg.QueueURL != tc.queueURL || cfg.QueueName != tc.name || region != tc.region || endpoint != tc.endpoint || cfg.QueueOwner != tc.owner || cfg.MaxMessageBytes != tc.maxBytes {
			t.Errorf("%s: queue URL %q, name %q, region %q, endpoint %q, owner %q, max %d; want %+v", tc.url, cfg.QueueURL, cfg.QueueName, region, endpoint, cfg.QueueOwner, cfg.MaxMessageBytes, tc)
		}
	}
}
