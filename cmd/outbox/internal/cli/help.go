package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

const helpIntro = `outbox delivers the messages of a transactional outbox table to brokers
and webhooks.

Usage: outbox <command> [flags]
`

const helpOutro = `Every command that reads the database takes --db URL or OUTBOX_DATABASE_URL:
  postgres://user@host:5432/db, mysql://user:pass@host:3306/db (MariaDB too),
  sqlite:///abs/path.db or sqlite://relative.db
and --config FILE or OUTBOX_CONFIG (YAML; see docs/configuration.md).
Settings come from flags, then OUTBOX_* variables, then the config file.

Environment:
  OUTBOX_DATABASE_URL    database URL (--db)
  OUTBOX_CONFIG          config file (--config)
  OUTBOX_TO              relay: route of last resort (--to)
  OUTBOX_WEBHOOK_SECRET  relay: secret that signs webhooks
  OUTBOX_LOG_LEVEL       relay: debug, info, warn or error (--log-level)
  OUTBOX_LOG_FORMAT      relay: text or json (--log-format)
  OUTBOX_BATCH_SIZE      relay: most messages per round (--batch-size)
  OUTBOX_ADMIN_ADDR      relay, admin: admin API address (--admin)
  OUTBOX_ADMIN_TOKEN     relay, admin: bearer token of the admin API (name "admin")
  OUTBOX_ALERT_WEBHOOK   relay: alert webhook URL (--alert-webhook)
  OUTBOX_RETENTION_SENT, OUTBOX_RETENTION_DEAD, OUTBOX_RETENTION_INTERVAL,
  OUTBOX_ARCHIVE, OUTBOX_NO_RETENTION
                         relay: retention of settled messages (--retention-*)

Exit status: 0 success, 1 failure at run time, 2 bad usage or configuration.
Run 'outbox help <command>' for a command's flags.
`

// help answers "outbox help [command…]".
func (e *env) help(args []string) error {
	if len(args) == 0 {
		printHelp(e.stdout)
		return nil
	}
	if len(args) > 1 {
		if c := lookupCommand(args[0] + " " + args[1]); c != nil {
			return e.printHelpOf(c)
		}
	}
	if c := lookupCommand(args[0]); c != nil {
		return e.printHelpOf(c)
	}
	if summary, ok := groups[args[0]]; ok {
		fmt.Fprintf(e.stdout, "outbox %s: %s\n\nCommands:\n", args[0], summary)
		t := newTable(e.stdout)
		for _, c := range commands {
			if strings.HasPrefix(c.name, args[0]+" ") {
				t.row("  outbox "+c.name, c.summary)
			}
		}
		t.flush()
		fmt.Fprintf(e.stdout, "\nRun 'outbox help %s <subcommand>' for its flags.\n", args[0])
		return nil
	}
	if x, ok := lookupExtra(args[0]); ok {
		if code := x.run(e.ctx, []string{"--help"}, e.stdout, e.stderr); code != 0 {
			return exitCode(code)
		}
		return nil
	}
	return usagef("help: unknown command %q; run 'outbox help'", strings.Join(args, " "))
}

func (e *env) printHelpOf(c *command) error {
	fs := flag.NewFlagSet("outbox "+c.name, flag.ContinueOnError)
	c.setup(fs)
	printCommandHelp(e.stdout, c, fs)
	return nil
}

// printHelp writes the command list.
func printHelp(w io.Writer) {
	fmt.Fprint(w, helpIntro)
	fmt.Fprint(w, "\nCommands:\n")
	t := newTable(w)
	for _, c := range commands {
		t.row("  "+c.name, c.summary)
	}
	for _, n := range extraNames() {
		x, _ := lookupExtra(n)
		t.row("  "+n, x.summary)
	}
	t.row("  help", "this text, or a command's flags")
	t.flush()
	fmt.Fprint(w, "\n", helpOutro)
}

// printCommandHelp writes one command's usage and flags.
func printCommandHelp(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: outbox %s %s\n\n%s\n", c.name, c.synopsis, strings.TrimSpace(c.about))
	has := false
	fs.VisitAll(func(*flag.Flag) { has = true })
	if has {
		fmt.Fprint(w, "\nFlags:\n")
		printFlags(w, fs)
	}
}
