package outboxkinesis_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txoutbox/outbox/inbox"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
	"github.com/txoutbox/outbox/publisher/outboxkinesis"
	"github.com/txoutbox/outbox/publisher/publishertest"
)

// TestConsumeShards: Consume reads every shard in order, hands a record
// whose handler failed again (the shard's later records wait behind it),
// reports each handled record to Checkpoint and, started again After
// those checkpoints, hands nothing twice.
func TestConsumeShards(t *testing.T) {
	t.Parallel()
	admin := local(t)
	p, _ := outboxkinesis.New(admin, nil)
	stream := newStream(t, admin, 3)
	const keys, rounds = 4, 5
	var sent []*publisher.Envelope
	for r := range rounds {
		var batch []*publisher.Envelope
		for k := range keys {
			batch = append(batch, env(stream, fmt.Sprintf("key-%d", k), fmt.Sprintf(`{"k":%d,"seq":%d}`, k, r)))
		}
		for i, err := range publishertest.Publish(t, p, 30*time.Second, batch...) {
			if err != nil {
				t.Fatalf("round %d message %d: %v", r, i, err)
			}
		}
		sent = append(sent, batch...)
	}
	failing := sent[keys+1].ID // key-1, seq 1
	var mu sync.Mutex
	calls := map[string]int{}
	var order []string // ids as handled
	checkpoints := map[string]string{}
	handler := func(ctx context.Context, m *inbox.Message) error {
		mu.Lock()
		defer mu.Unlock()
		calls[m.ID]++
		if m.ID == failing && calls[m.ID] <= 2 {
			return errors.New("injected handler failure")
		}
		order = append(order, m.ID)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := &outboxkinesis.ConsumeOptions{
		UntilCaughtUp: true, PollInterval: 20 * time.Millisecond, RetryDelay: 20 * time.Millisecond, Logger: quiet,
		Checkpoint: func(shard, seq string) {
			mu.Lock()
			checkpoints[shard] = seq
			mu.Unlock()
		},
	}
	if err := outboxkinesis.Consume(ctx, admin, stream, handler, opts); err != nil {
		t.Fatal(err)
	}
	if calls[failing] != 3 {
		t.Errorf("failing message handed %d times, want 3", calls[failing])
	}
	if len(order) != len(sent) {
		t.Fatalf("%d messages handled, want %d", len(order), len(sent))
	}
	pos := map[string]int{}
	for i, id := range order {
		pos[id] = i
	}
	for k := range keys {
		for r := 1; r < rounds; r++ {
			a, b := sent[(r-1)*keys+k], sent[r*keys+k]
			if pos[a.ID] > pos[b.ID] {
				t.Errorf("key-%d: seq %d handled before seq %d", k, r, r-1)
			}
		}
	}
	if len(checkpoints) == 0 {
		t.Fatal("no checkpoint reported")
	}

	// Resumed after the checkpoints: only what came since.
	late := env(stream, "key-0", `{"late":true}`)
	if err := publishertest.Publish(t, p, 30*time.Second, late)[0]; err != nil {
		t.Fatal(err)
	}
	var again []string
	opts = &outboxkinesis.ConsumeOptions{UntilCaughtUp: true, PollInterval: 20 * time.Millisecond, After: checkpoints, Logger: quiet}
	err := outboxkinesis.Consume(ctx, admin, stream, func(_ context.Context, m *inbox.Message) error {
		again = append(again, m.ID)
		return nil
	}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 1 || again[0] != late.ID {
		t.Errorf("resumed after the checkpoints: handled %v, want only %s", again, late.ID)
	}
}

// TestConsumeMissingStream: Consume of a stream that does not exist
// returns an error naming it.
func TestConsumeMissingStream(t *testing.T) {
	t.Parallel()
	err := outboxkinesis.Consume(context.Background(), local(t), "no_such_stream_x", func(context.Context, *inbox.Message) error { return nil }, nil)
	if err == nil || !strings.Contains(err.Error(), "no_such_stream_x") || !strings.Contains(err.Error(), "ResourceNotFoundException") {
		t.Fatalf("Consume of a missing stream: %v", err)
	}
}

// TestOpenURL: the kinesis:// URL forms publish to the local server;
// bad URLs are one-line errors naming what is wrong.
func TestOpenURL(t *testing.T) {
	admin := local(t)
	named := newStream(t, admin, 1)
	byDest := newStream(t, admin, 1)
	for _, c := range []struct {
		raw, dest, stream string
		ce                *outboxce.Format
	}{
		{"kinesis://" + named + "?region=" + region + "&endpoint=" + url.QueryEscape(endpoint), "ignored.topic", named, nil},
		{"kinesis://?region=" + region + "&endpoint=" + url.QueryEscape(endpoint), byDest, byDest, nil},
		{"kinesis:///?region=" + region + "&endpoint=" + url.QueryEscape(endpoint), byDest, byDest, &outboxce.Format{Mode: outboxce.Binary}},
	} {
		u, _ := url.Parse(c.raw)
		p, err := outboxkinesis.OpenURL(u, c.ce, quiet)
		if err != nil {
			t.Fatalf("%s: %v", c.raw, err)
		}
		e := env(c.dest, "k", `{"via":"url"}`)
		if err := publishertest.Publish(t, p, 30*time.Second, e)[0]; err != nil {
			t.Fatalf("%s: %v", c.raw, err)
		}
		_ = p.Close()
		found := false
		for _, r := range readAll(t, admin, c.stream) {
			m, err := outboxkinesis.Decode(r)
			found = found || (err == nil && m.ID == e.ID)
			if err == nil && m.ID == e.ID && (c.ce != nil) != strings.Contains(string(r.Data), `"specversion"`) {
				t.Errorf("%s: record %s", c.raw, r.Data)
			}
		}
		if !found {
			t.Errorf("%s: message not in stream %s", c.raw, c.stream)
		}
	}

	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	for raw, says := range map[string]string{
		"kinesis://s?region=r&color=blue&shade=dark":                   `unknown parameter(s) color, shade`,
		"kinesis://s/path?region=r":                                    "takes no path",
		"kinesis://user:secret@s?region=r":                             "credentials do not go in the URL",
		"kinesis://s:4567?region=r":                                    "takes no port",
		"kinesis://s?region=r&endpoint=localhost:4567":                 "want an http:// or https:// URL",
		"kinesis://bad~name?region=r":                                  "invalid stream name",
		"kinesis://s?region=r&region=q":                                `"region" given more than once`,
		"kinesis://s":                                                  "no AWS region",
		"kinesis:s?region=r":                                           "two slashes",
		"kinesis://s?region=r&stream_arn=arn:aws:kinesis:r:1:stream/s": "not both",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		_, err = outboxkinesis.OpenURL(u, nil, nil)
		if err == nil || !strings.Contains(err.Error(), says) || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "secret") {
			t.Errorf("OpenURL(%s) = %v, want one line saying %q without the secret", raw, err, says)
		}
	}
}
