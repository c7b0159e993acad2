package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxurl"
)

// nullURL names the in-process destination that confirms at once.
const nullURL = "null://"

// destination is where the bench's relays publish.
type destination struct {
	pub         outbox.Publisher
	name        string // redacted URL, for the report
	takesStdout bool   // stdout://: the report goes to stderr
	sink        *sink
	stop        func() // ends an in-process broker (kfake://); nil if none
}

// kfakeURL names an in-process Kafka (franz-go's kfake, the Kafka
// protocol over loopback TCP) that the run starts and stops.
const kfakeURL = "kfake://"

// openDestination resolves --to and --sink. Every error is bad usage: no
// connection is made here.
func openDestination(o *options, secret string, stdout io.Writer) (*destination, error) {
	if o.sink {
		s, err := startSink()
		if err != nil {
			return nil, err
		}
		if secret == "" {
			// Sign like a real webhook so the signing cost is measured.
			k := make([]byte, 24)
			_, _ = rand.Read(k)
			secret = "whsec_" + base64.StdEncoding.EncodeToString(k)
		}
		pub, err := outboxurl.Open(s.url, &outboxurl.Options{WebhookSecret: secret})
		if err != nil {
			s.close()
			return nil, usagef("%s: --sink: %v", o.workload, err)
		}
		return &destination{pub: pub, name: s.url + " (in-process sink, signed)", sink: s}, nil
	}
	if strings.EqualFold(strings.TrimSuffix(o.to, "/"), strings.TrimSuffix(nullURL, "/")) {
		return &destination{pub: nullPublisher{}, name: nullURL + " (in-process, confirms at once)"}, nil
	}
	var stop func()
	if strings.EqualFold(strings.TrimSuffix(o.to, "/"), strings.TrimSuffix(kfakeURL, "/")) {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			return nil, fmt.Errorf("%s: start an in-process Kafka: %w", o.workload, err)
		}
		o.to, stop = "kafka://"+strings.Join(c.ListenAddrs(), ","), c.Close
	}
	pub, err := outboxurl.Open(o.to, &outboxurl.Options{WebhookSecret: secret, Stdout: stdout})
	if err != nil {
		if stop != nil {
			stop()
		}
		return nil, usagef("%s: --to: %v (or null://)", o.workload, err)
	}
	d := &destination{pub: pub, name: outboxurl.Redact(o.to), stop: stop}
	if stop != nil {
		d.name += " (kfake, in process)"
	}
	d.takesStdout = strings.HasPrefix(strings.ToLower(o.to), "stdout:")
	return d, nil
}

func (d *destination) close() {
	_ = d.pub.Close()
	if d.sink != nil {
		d.sink.close()
	}
	if d.stop != nil {
		d.stop()
	}
}

// nullPublisher confirms every message at once: the relay's own cost.
type nullPublisher struct{}

func (nullPublisher) Publish(_ context.Context, batch []*outbox.Envelope) []error {
	return make([]error, len(batch))
}

func (nullPublisher) Close() error { return nil }

// holdPublisher leaves messages that are not the bench's pending: it
// reports their destination unavailable, which neither counts an attempt
// nor kills them.
type holdPublisher struct{}

var errHeld = publisher.Unavailable(errors.New("held back by outbox bench: not a bench message"))

func (holdPublisher) Publish(_ context.Context, batch []*outbox.Envelope) []error {
	errs := make([]error, len(batch))
	for i := range errs {
		errs[i] = errHeld
	}
	return errs
}

func (holdPublisher) Close() error { return nil }

// sink is an in-process HTTP endpoint that reads each request and answers
// 200.
type sink struct {
	url      string
	srv      *http.Server
	requests atomic.Int64
}

func startSink() (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &sink{url: "http://" + ln.Addr().String() + "/"}
	s.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			s.requests.Add(1)
			w.WriteHeader(http.StatusOK)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// serveHooks serves h on a free local port: it returns the webhook URL
// and a function that stops the server.
func serveHooks(h http.HandlerFunc) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/hooks", func() { _ = srv.Close() }, nil
}

func (s *sink) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}
