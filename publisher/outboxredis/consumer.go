package outboxredis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/txoutbox/outbox/inbox"
)

// ackTimeout bounds the XACK after a handler succeeded, which runs even
// when ctx ended meanwhile.
const ackTimeout = 5 * time.Second

// consumer is the state of one Consume.
type consumer struct {
	rdb                  redis.UniversalClient
	stream, group, name  string
	handler              func(context.Context, *inbox.Message) error
	o                    ConsumeOptions
	retryAt, nextClaimAt time.Time
}

func newConsumer(rdb redis.UniversalClient, stream, group, name string, handler func(context.Context, *inbox.Message) error, opts *ConsumeOptions) (*consumer, error) {
	if rdb == nil || handler == nil {
		return nil, errors.New("outboxredis: Consume: nil client or handler")
	}
	if stream == "" || group == "" || name == "" {
		return nil, errors.New("outboxredis: Consume: stream, group and consumer name are required")
	}
	c := &consumer{rdb: rdb, stream: stream, group: group, name: name, handler: handler}
	if opts != nil {
		c.o = *opts
	}
	if c.o.Count < 0 || c.o.Block < 0 || c.o.RetryDelay < 0 || c.o.ClaimIdle < 0 {
		return nil, errors.New("outboxredis: ConsumeOptions: Count, Block, RetryDelay and ClaimIdle must not be negative")
	}
	if c.o.Count == 0 {
		c.o.Count = DefaultConsumeCount
	}
	if c.o.Block == 0 {
		c.o.Block = DefaultConsumeBlock
	}
	if c.o.RetryDelay == 0 {
		c.o.RetryDelay = DefaultRetryDelay
	}
	if c.o.Logger == nil {
		c.o.Logger = slog.Default()
	}
	return c, nil
}

// run reads this consumer's pending entries from "0", then new ones
// (">"), going back to the pending ones after a failure.
func (c *consumer) run(ctx context.Context) error {
	cursor := "0"
	for ctx.Err() == nil {
		now := time.Now()
		if cursor == ">" && !c.retryAt.IsZero() && !now.Before(c.retryAt) {
			cursor, c.retryAt = "0", time.Time{}
		}
		if c.o.ClaimIdle > 0 && !now.Before(c.nextClaimAt) {
			if err := c.claim(ctx); err != nil {
				return err
			}
			c.nextClaimAt = time.Now().Add(c.o.ClaimIdle)
		}
		block := c.o.Block
		if cursor != ">" {
			block = -1 // pending entries: answer at once
		}
		res, err := c.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: c.group, Consumer: c.name, Streams: []string{c.stream, cursor}, Count: c.o.Count, Block: block}).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			if err := c.fail(ctx, "XREADGROUP", err); err != nil {
				return err
			}
			continue
		}
		var msgs []redis.XMessage
		if len(res) > 0 {
			msgs = res[0].Messages
		}
		if cursor != ">" {
			if len(msgs) == 0 {
				cursor = ">"
				continue
			}
			cursor = msgs[len(msgs)-1].ID
		}
		c.deliverAll(ctx, msgs)
	}
	return nil
}

// claim takes over the group's entries idle for ClaimIdle and runs them.
func (c *consumer) claim(ctx context.Context) error {
	start := "0-0"
	for ctx.Err() == nil {
		msgs, next, err := c.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: c.stream, Group: c.group, Consumer: c.name, MinIdle: c.o.ClaimIdle, Start: start, Count: c.o.Count}).Result()
		if err != nil {
			return c.fail(ctx, "XAUTOCLAIM", err)
		}
		c.deliverAll(ctx, msgs)
		if next == "0-0" || next == "" {
			return nil
		}
		start = next
	}
	return nil
}

// fail decides what a failed command means: nil to go on (ctx ended, or
// a connection failure worth waiting out), or the error to return.
func (c *consumer) fail(ctx context.Context, cmd string, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	if strings.HasPrefix(err.Error(), "NOGROUP") {
		return fmt.Errorf("%w: %s %q group %q: %v", ErrNoGroup, cmd, c.stream, c.group, err)
	}
	if isServerReply(err) || errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("outboxredis: consume %s %q: %w", cmd, c.stream, err)
	}
	c.o.Logger.Warn("outboxredis: consume: Redis unreachable; retrying", "stream", c.stream, "cmd", cmd, "err", err)
	t := time.NewTimer(c.o.Block)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return nil
}

// deliverAll runs the handler on msgs in order, stopping when ctx ends
// (what is left stays pending for the next run).
func (c *consumer) deliverAll(ctx context.Context, msgs []redis.XMessage) {
	for _, x := range msgs {
		if ctx.Err() != nil {
			return
		}
		m, err := Decode(c.stream, x)
		if err != nil {
			c.o.Logger.Error("outboxredis: consume: cannot decode; acking the entry", "stream", c.stream, "entry", x.ID, "err", err)
			c.ack(ctx, x.ID)
			continue
		}
		if err := c.handler(m.Context(ctx), m); err != nil {
			c.o.Logger.Warn("outboxredis: consume: handler failed; the entry stays pending and runs again", "stream", c.stream, "entry", x.ID, "message_id", m.ID, "err", err)
			if c.retryAt.IsZero() {
				c.retryAt = time.Now().Add(c.o.RetryDelay)
			}
			continue
		}
		c.ack(ctx, x.ID)
	}
}

func (c *consumer) ack(ctx context.Context, entryID string) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
	defer cancel()
	if err := c.rdb.XAck(actx, c.stream, c.group, entryID).Err(); err != nil {
		c.o.Logger.Warn("outboxredis: consume: XACK failed; the entry will run again", "stream", c.stream, "entry", entryID, "err", err)
	}
}
