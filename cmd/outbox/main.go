// Command outbox runs the transactional outbox from the shell: it migrates
// the schema, runs the relay, enqueues messages and inspects and repairs
// the outbox table. Run 'outbox help' for the commands.
package main

import (
	"context"
	"os"

	"github.com/txoutbox/outbox/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
