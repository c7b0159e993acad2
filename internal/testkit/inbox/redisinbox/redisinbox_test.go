package redisinbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/txoutbox/outbox/inbox/redisinbox"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

func client(t *testing.T) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		testdb.Unavailable(t, "Redis at 127.0.0.1:6379", err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func TestRedisInboxDedupes(t *testing.T) {
	rdb := client(t)
	prefix := fmt.Sprintf("test:%d:", time.Now().UnixNano())
	t.Cleanup(func() {
		keys, _ := rdb.Keys(context.Background(), prefix+"*").Result()
		if len(keys) > 0 {
			rdb.Del(context.Background(), keys...)
		}
	})
	ib, err := redisinbox.New(rdb, &redisinbox.Config{Consumer: "sms", KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	// 2,000 ids, each delivered 3 times to 8 goroutines at once.
	var effects atomic.Int64
	var wg sync.WaitGroup
	ch := make(chan string, 64)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ch {
				if _, err := ib.Handle(context.Background(), id, func(context.Context) error { effects.Add(1); return nil }); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for r := 0; r < 3; r++ {
		for i := 0; i < 2000; i++ {
			ch <- fmt.Sprintf("id-%d", i)
		}
	}
	close(ch)
	wg.Wait()
	if effects.Load() != 2000 {
		t.Fatalf("%d effects for 2000 messages", effects.Load())
	}
	// A failing handler releases the message for redelivery.
	boom := errors.New("sms gateway down")
	if ran, err := ib.Handle(context.Background(), "id-fail", func(context.Context) error { return boom }); ran || !errors.Is(err, boom) {
		t.Fatalf("failing handler: %v %v", ran, err)
	}
	if ran, err := ib.Handle(context.Background(), "id-fail", func(context.Context) error { return nil }); !ran || err != nil {
		t.Fatalf("redelivery after failure: %v %v", ran, err)
	}
	if ttl := rdb.TTL(context.Background(), prefix+"sms:id-fail").Val(); ttl < 6*24*time.Hour {
		t.Fatalf("done mark TTL %v, want the retention", ttl)
	}
	if _, err := redisinbox.New(rdb, &redisinbox.Config{}); err == nil {
		t.Fatal("missing consumer accepted")
	}
}
