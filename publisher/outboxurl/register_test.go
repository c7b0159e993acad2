package outboxurl

import (
	"context"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// TestRegisteredScheme: a scheme served by a module of its own is refused
// with the module's name until the program registers it; registered, Open
// hands it the parsed URL without the CloudEvents parameters and the
// format they asked for.
func TestRegisteredScheme(t *testing.T) {
	_, err := Open("kinesis://orders?region=eu-west-1", nil)
	if err == nil || !strings.Contains(err.Error(), "github.com/txoutbox/outbox/publisher/outboxkinesis") || !strings.Contains(err.Error(), "Register") {
		t.Fatalf("an unregistered kinesis://: %v, want an error naming the module and Register", err)
	}

	var gotURL *url.URL
	var gotCE *outboxce.Format
	t.Cleanup(func() { unregister("kinesis") })
	Register(Scheme{
		Names: []string{"Kinesis"},
		Open: func(u *url.URL, ce *outboxce.Format, _ *slog.Logger) (publisher.Publisher, error) {
			gotURL, gotCE = u, ce
			return publisher.Func(func(context.Context, *publisher.Envelope) error { return nil }), nil
		},
	})
	p, err := Open("kinesis://orders?region=eu-west-1&format=cloudevents&ce_source=/shop", nil)
	if err != nil || p == nil {
		t.Fatalf("a registered kinesis://: %v", err)
	}
	if gotURL.Host != "orders" || gotURL.Query().Get("region") != "eu-west-1" || gotURL.Query().Has("format") || gotURL.Query().Has("ce_source") {
		t.Errorf("the opener got %s, want the URL without its CloudEvents parameters", gotURL)
	}
	if gotCE == nil || gotCE.String() == "" {
		t.Errorf("the opener got no CloudEvents format for format=cloudevents")
	}
	if _, err := Open("kinesis://orders", nil); err != nil || gotCE != nil {
		t.Errorf("plain kinesis://: %v, format %v; want nil", err, gotCE)
	}
	if !slices.Contains(Supported, "kinesis") {
		t.Errorf("Supported %v lacks the registered scheme", Supported)
	}

	for _, bad := range []Scheme{
		{Names: []string{"kafka"}, Open: func(*url.URL, *outboxce.Format, *slog.Logger) (publisher.Publisher, error) { return nil, nil }},
		{Names: []string{"x"}},
		{Open: func(*url.URL, *outboxce.Format, *slog.Logger) (publisher.Publisher, error) { return nil, nil }},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%v) did not panic", bad.Names)
				}
			}()
			Register(bad)
		}()
	}
}

// unregister undoes Register for name, so that a test leaves Supported as
// it found it.
func unregister(name string) {
	registeredMu.Lock()
	defer registeredMu.Unlock()
	delete(registered, name)
	for i, s := range Supported {
		if s == name {
			Supported = append(Supported[:i:i], Supported[i+1:]...)
			break
		}
	}
}
