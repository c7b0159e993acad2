package publisher_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/txoutbox/outbox/publisher"
)

// endpoint stands for a destination's client: it answers each message
// with an HTTP status code, or fails to connect.
type endpoint func(ctx context.Context, env *publisher.Envelope) (status int, retryAfter time.Duration, err error)

// httpPublisher is a publisher of one's own over such a client. It keeps
// the contract: one result per envelope, in order; nil only for a message
// the destination confirmed; failures classified so that the relay knows
// whether to retry, wait, hold the route or give up.
type httpPublisher struct {
	send endpoint
}

func (p *httpPublisher) Publish(ctx context.Context, batch []*publisher.Envelope) []error {
	errs := make([]error, len(batch))
	for i, env := range batch {
		if err := ctx.Err(); err != nil {
			errs[i] = err // out of time: not confirmed, so not nil
			continue
		}
		errs[i] = p.publish(ctx, env)
	}
	return errs
}

func (p *httpPublisher) publish(ctx context.Context, env *publisher.Envelope) error {
	status, wait, err := p.send(ctx, env)
	switch {
	case err != nil:
		// Nothing reached the destination: the relay holds the whole
		// route and probes it, without charging the message an attempt.
		return publisher.Unavailable(err)
	case status >= 200 && status < 300:
		return nil
	case status == 429 || status == 503:
		// Throttled: hold the route for as long as it asked.
		return publisher.RetryAfter(fmt.Errorf("status %d", status), wait)
	case status >= 400 && status < 500:
		// The destination will never take this message: dead at once.
		return publisher.Permanent(fmt.Errorf("status %d", status))
	default:
		return fmt.Errorf("status %d", status) // transient: retried with backoff
	}
}

func (p *httpPublisher) Close() error { return nil }

// A publisher of one's own turns each answer of its destination into a
// result the relay acts on.
func ExamplePublisher() {
	answers := map[string]int{"order.created": 202, "order.bogus": 400, "order.busy": 429, "order.flaky": 502}
	var pub publisher.Publisher = &httpPublisher{send: func(ctx context.Context, env *publisher.Envelope) (int, time.Duration, error) {
		if env.Topic == "order.down" {
			return 0, 0, errors.New("connection refused")
		}
		return answers[env.Topic], 30 * time.Second, nil
	}}

	var batch []*publisher.Envelope
	for _, topic := range []string{"order.created", "order.bogus", "order.busy", "order.flaky", "order.down"} {
		batch = append(batch, &publisher.Envelope{Topic: topic, Destination: topic, Payload: []byte(`{}`), Attempt: 1})
	}
	for i, err := range pub.Publish(context.Background(), batch) {
		if err == nil {
			fmt.Printf("%-13s confirmed\n", batch[i].Topic)
			continue
		}
		line := fmt.Sprintf("%-13s %s: %v", batch[i].Topic, publisher.Classify(err), err)
		if d := publisher.RetryAfterOf(err); d > 0 {
			line += ", wait " + d.String()
		}
		fmt.Println(line)
	}
	// Output:
	// order.created confirmed
	// order.bogus   permanent: status 400
	// order.busy    transient: status 429, wait 30s
	// order.flaky   transient: status 502
	// order.down    unavailable: connection refused
}

// Classify is how the relay reads a publish error: the outermost mark
// wins, wrapping keeps it, and unmarked errors are transient except
// deadlines and timeouts, whose message may have arrived.
func ExampleClassify() {
	rejected := publisher.Permanent(errors.New("message too large"))
	for _, err := range []error{
		rejected,
		fmt.Errorf("kafka: %w", rejected),
		publisher.Unavailable(errors.New("no such queue")),
		publisher.Unknown(errors.New("connection reset after send")),
		context.DeadlineExceeded,
		publisher.RetryAfter(errors.New("rate limited"), time.Minute),
		errors.New("broker hiccup"),
	} {
		fmt.Printf("%-11s %v\n", publisher.Classify(err), err)
	}
	// Output:
	// permanent   message too large
	// permanent   kafka: message too large
	// unavailable no such queue
	// unknown     connection reset after send
	// unknown     context deadline exceeded
	// transient   rate limited
	// transient   broker hiccup
}

// Func makes a publisher of a function that handles one envelope: the
// in-process destination of an application that embeds the relay. Each
// envelope gets its own result, in the batch's order.
func ExampleFunc() {
	pub := publisher.Func(func(ctx context.Context, env *publisher.Envelope) error {
		if _, err := strconv.Atoi(strings.TrimSpace(string(env.Payload))); err != nil {
			// Retrying cannot fix a malformed message.
			return publisher.Permanent(fmt.Errorf("payload %q is not a quantity", env.Payload))
		}
		// Reserve the stock, update a read model, …
		return nil
	})
	batch := []*publisher.Envelope{
		{Topic: "stock.reserved", Key: "sku-1", Payload: []byte("3")},
		{Topic: "stock.reserved", Key: "sku-2", Payload: []byte("three")},
	}
	for i, err := range pub.Publish(context.Background(), batch) {
		if err == nil {
			fmt.Printf("%s: confirmed\n", batch[i].Key)
		} else {
			fmt.Printf("%s: %s: %v\n", batch[i].Key, publisher.Classify(err), err)
		}
	}
	// Output:
	// sku-1: confirmed
	// sku-2: permanent: payload "three" is not a quantity
}
