package outboxpubsub

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"cloud.google.com/go/pubsub/v2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// URL parameters of pubsub:// destinations:
//
//	pubsub://PROJECT[/TOPIC][?endpoint=HOST:PORT|region=REGION][&ordering=false]
//
//	endpoint=HOST:PORT   an emulator (or pstest): plain gRPC, no credentials
//	region=REGION        the regional endpoint REGION-pubsub.googleapis.com:443
//	ordering=false       publish without ordering keys; defaults to true
//
// Without endpoint the client uses Application Default Credentials, and
// PUBSUB_EMULATOR_HOST, when set, sends it to an emulator instead.
const (
	ParamEndpoint = "endpoint"
	ParamRegion   = "region"
	ParamOrdering = "ordering"
)

// OpenURL opens the publisher of a pubsub:// destination URL (without
// its format and ce_source parameters: ce is the CloudEvents format they
// ask for, nil for the plain wire), on a client of its own made with
// ClientConfig, which Close closes. With a topic in the path every
// message goes to it; without, each goes to the topic its destination
// names. log is unused: the client logs nothing of its own. Errors are
// one line.
func OpenURL(u *url.URL, ce *outboxce.Format, log *slog.Logger) (publisher.Publisher, error) {
	_ = log
	where := "pubsub://" + u.Host + u.EscapedPath()
	fail := func(format string, args ...any) (publisher.Publisher, error) {
		return nil, fmt.Errorf("destination %s: "+format, append([]any{where}, args...)...)
	}
	if u.Opaque != "" || u.Host == "" {
		return fail("no project: write pubsub://PROJECT/TOPIC or pubsub://PROJECT")
	}
	if u.User != nil {
		return fail("pubsub URLs take no user or password: the client uses Application Default Credentials")
	}
	if u.Port() != "" {
		return fail("the host is the project ID, not an address: name an emulator with ?endpoint=HOST:PORT")
	}
	if u.Fragment != "" {
		return fail("pubsub URLs take no fragment")
	}
	project := u.Host
	topic := strings.TrimPrefix(u.Path, "/")
	if topic != "" {
		if _, err := topicName(project, topic); err != nil || strings.Contains(topic, "/") {
			if err == nil {
				err = fmt.Errorf("invalid topic ID %q", topic)
			}
			return fail("%v", err)
		}
	}
	q := u.Query()
	var unknown []string
	for k, vs := range q {
		if !slices.Contains([]string{ParamEndpoint, ParamRegion, ParamOrdering}, k) {
			unknown = append(unknown, k)
		} else if len(vs) > 1 {
			return fail("parameter %q given more than once", k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return fail("unknown parameter(s) %s (pubsub takes %s, %s, %s)", strings.Join(unknown, ", "), ParamEndpoint, ParamRegion, ParamOrdering)
	}
	cfg := &Config{Topic: topic, CloseClient: true, CloudEvents: ce}
	if v := q.Get(ParamOrdering); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return fail("%s=%q: want true or false", ParamOrdering, v)
		}
		cfg.DisableOrdering = !on
	}
	var opts []option.ClientOption
	endpoint, region := q.Get(ParamEndpoint), q.Get(ParamRegion)
	switch {
	case endpoint != "" && region != "":
		return fail("%s and %s exclude each other", ParamEndpoint, ParamRegion)
	case endpoint != "":
		if _, port, err := net.SplitHostPort(endpoint); err != nil || port == "" {
			return fail("%s=%q: want HOST:PORT", ParamEndpoint, endpoint)
		}
		opts = append(opts,
			option.WithEndpoint(endpoint),
			option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
			option.WithTelemetryDisabled())
	case region != "":
		for _, c := range region {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
				return fail("%s=%q: want a region name such as europe-west1", ParamRegion, region)
			}
		}
		opts = append(opts, option.WithEndpoint(region+"-pubsub.googleapis.com:443"))
	}
	if ce.IsStructured() {
		return fail("%s=%s is for webhooks; pubsub takes %s=%s, binary mode", outboxce.ParamFormat, ce, outboxce.ParamFormat, outboxce.FormatBinary)
	}
	client, err := pubsub.NewClientWithConfig(context.Background(), project, ClientConfig(), opts...)
	if err != nil {
		return fail("cannot make a Pub/Sub client: %s", oneLine(err.Error()))
	}
	p, err := New(client, cfg)
	if err != nil {
		_ = client.Close()
		return fail("%v", err)
	}
	return p, nil
}
