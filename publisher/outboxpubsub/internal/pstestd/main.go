// Command pstestd serves Google's in-process Pub/Sub server (pstest) on a
// TCP address, so that another process — an `outbox relay`, an `outbox
// bench` — can publish to it with pubsub://PROJECT/TOPIC?endpoint=ADDR.
// It creates the topics it is given (and, with -subscribe, a
// subscription of each), counts the Publish calls it answers and the
// messages they carried, and prints the counts every -report interval
// and when it is stopped (SIGINT, SIGTERM). State is in memory only.
//
//	go run ./internal/pstestd -addr 127.0.0.1:14568 -project bench -topics orders
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
)

// counter counts the Publish calls of the server and lets each through.
type counter struct{ calls, messages atomic.Int64 }

func (c *counter) React(req any) (bool, any, error) {
	if r, ok := req.(*pb.PublishRequest); ok {
		c.calls.Add(1)
		c.messages.Add(int64(len(r.Messages)))
	}
	return false, nil, nil
}

func (c *counter) report() string {
	calls, msgs := c.calls.Load(), c.messages.Load()
	per := 0.0
	if msgs > 0 {
		per = float64(calls) / float64(msgs)
	}
	return fmt.Sprintf("pstestd: %d Publish calls, %d messages, %.3f calls per message", calls, msgs, per)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:14568", "address to serve on")
	project := flag.String("project", "outbox-test", "project of the topics")
	topics := flag.String("topics", "", "comma-separated topic IDs to create")
	subscribe := flag.Bool("subscribe", false, "create a subscription (TOPIC-sub, with message ordering) of each topic")
	every := flag.Duration("report", 0, "print the counts at this interval (0: only when stopped)")
	flag.Parse()
	log.SetFlags(0)

	var c counter
	srv := pstest.NewServerWithAddress(*addr, pstest.ServerReactorOption{FuncName: "Publish", Reactor: &c})
	defer func() { _ = srv.Close() }()
	ctx := context.Background()
	for _, t := range strings.Split(*topics, ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		name := "projects/" + *project + "/topics/" + t
		if _, err := srv.GServer.CreateTopic(ctx, &pb.Topic{Name: name}); err != nil {
			log.Fatalf("pstestd: create topic %s: %v", name, err)
		}
		if *subscribe {
			sub := &pb.Subscription{Name: "projects/" + *project + "/subscriptions/" + t + "-sub", Topic: name, AckDeadlineSeconds: 10, EnableMessageOrdering: true}
			if _, err := srv.GServer.CreateSubscription(ctx, sub); err != nil {
				log.Fatalf("pstestd: create subscription of %s: %v", name, err)
			}
		}
	}
	log.Printf("pstestd: serving on %s (project %s, topics %q)", srv.Addr, *project, *topics)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	var tick <-chan time.Time
	if *every > 0 {
		t := time.NewTicker(*every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-tick:
			log.Print(c.report())
		case <-stop:
			log.Print(c.report())
			return
		}
	}
}
