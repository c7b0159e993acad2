package syncbuf_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/txoutbox/outbox/internal/syncbuf"
)

// TestConcurrentWrites: writes from many goroutines, read while they run,
// all arrive whole (run with -race).
func TestConcurrentWrites(t *testing.T) {
	var b syncbuf.Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = b.Write([]byte("line\n"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := strings.Count(b.String(), "line\n"); got != 800 {
		t.Fatalf("%d lines, want 800", got)
	}
}
