package cli

import "github.com/txoutbox/outbox/internal/bench"

func init() {
	Register("bench", bench.Summary, bench.Main)
}
