package cli

import "github.com/txoutbox/outbox/cmd/outbox/internal/bench"

func init() {
	Register("bench", bench.Summary, bench.Main)
}
