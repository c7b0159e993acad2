package cli

import "github.com/txoutbox/outbox/cmd/outbox/internal/demo"

func init() {
	Register("demo", "the whole loop on embedded defaults, with a relay crash and a flaky downstream", demo.Main)
}
