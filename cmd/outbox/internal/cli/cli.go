package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/cliflag"
	"github.com/txoutbox/outbox/internal/dburl"
)

// Exit statuses of the outbox command.
const (
	// ExitOK: the command did what was asked.
	ExitOK = 0
	// ExitFailure: the command failed at run time (the database or a
	// destination could not be reached, nothing matched an explicit id).
	ExitFailure = 1
	// ExitUsage: bad usage or configuration (unknown command or flag, bad
	// URL, route or config file); nothing was done.
	ExitUsage = 2
)

// Main runs the outbox command line with args (without the program name),
// writing results to stdout and the one-line error, if any, to stderr. It
// returns the exit status: ExitOK, ExitFailure or ExitUsage. Environment
// variables are read from the process; standard input is os.Stdin.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{ctx: ctx, stdout: stdout, stderr: stderr, stdin: os.Stdin, getenv: os.Getenv}
	return e.main(args)
}

// env is what a command runs with: its streams, its environment and the
// secrets it must never print.
type env struct {
	ctx    context.Context
	stdout io.Writer
	stderr io.Writer
	stdin  io.Reader
	getenv func(string) string

	mu      sync.Mutex
	secrets []string
}

// addSecret records s (a password, a webhook secret) so that no error
// line or log record of this run prints it.
func (e *env) addSecret(s string) {
	if len(s) < 3 {
		return // too short to scrub without mangling ordinary text
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.secrets = append(e.secrets, s)
}

// redact replaces every recorded secret in s.
func (e *env) redact(s string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, sec := range e.secrets {
		s = strings.ReplaceAll(s, sec, "xxxxx")
	}
	return s
}

// main dispatches args to a command and turns its error into an exit
// status and one line on stderr.
func (e *env) main(args []string) int {
	err := e.dispatch(args)
	if err == nil {
		return ExitOK
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code)
	}
	fmt.Fprintf(e.stderr, "outbox: %s\n", e.redact(errorLine(err)))
	return exitStatus(err)
}

// exitCode is an error that carries an exit status and has already
// reported itself (an extra command's status).
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit status %d", int(c)) }

// usageError marks bad usage or configuration: exit status 2.
type usageError struct{ err error }

func (u *usageError) Error() string { return u.err.Error() }
func (u *usageError) Unwrap() error { return u.err }

// usagef returns a usage error (exit status 2).
func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// asUsage marks err as a usage error, keeping its chain.
func asUsage(err error) error {
	if err == nil {
		return nil
	}
	return &usageError{err}
}

// exitStatus classifies err: bad usage or configuration is 2, everything
// else 1.
func exitStatus(err error) int {
	var u *usageError
	var v *outbox.ValidationError
	switch {
	case errors.As(err, &u), errors.As(err, &v), errors.Is(err, dburl.ErrBadURL):
		return ExitUsage
	}
	return ExitFailure
}

// errorLine renders err as one line without a leading "outbox: ", which
// Main adds once.
func errorLine(err error) string { return cliflag.ErrorLine(err) }

// command is one built-in command. setup declares its flags on fs and
// returns the function that runs it with the positional arguments.
type command struct {
	name     string // "dead list"
	synopsis string // after the name: "[--topic T] [--json]"
	summary  string // one line for the command list
	about    string // a paragraph for the command's help
	setup    func(fs *flag.FlagSet) func(e *env, args []string) error
}

// commands lists the built-in commands in help order; groups lists the
// words that only prefix subcommands.
var (
	commands []*command
	groups   = map[string]string{
		"dead":  "list, requeue or discard dead messages",
		"adopt": "check an existing local message table, print the indexes it wants",
		"keys":  "manage the key file that seals payloads: new, rotate, list, erase",
	}
)

func init() {
	commands = []*command{
		migrateCommand(), migrateSQLCommand(),
		relayCommand(), adminCommand(),
		enqueueCommand(),
		statusCommand(),
		deadListCommand(), deadRequeueCommand(), deadDiscardCommand(),
		replayCommand(),
		keysNewCommand(), keysRotateCommand(), keysListCommand(), keysEraseCommand(),
		adoptCheckCommand(), adoptSQLCommand(),
		versionCommand(), completionCommand(),
	}
}

func lookupCommand(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// ExtraFunc runs a command registered with Register. It receives the
// arguments after the command name (including --help, which it should
// answer with its usage on stdout and status 0) and returns the exit
// status: 0 success, 1 failure at run time, 2 bad usage, with errors as
// one line on stderr prefixed "outbox: ".
type ExtraFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) int

type extraCommand struct {
	summary string
	run     ExtraFunc
}

var (
	extraMu       sync.Mutex
	extraCommands = map[string]extraCommand{}
)

// Register adds a top-level command (such as "demo" or "bench") that is
// implemented outside this file set's built-ins. Call it from an init
// function; summary is the one line shown by 'outbox help'. It panics if
// name is empty, contains a space, or is already taken, since that is a
// programming error.
func Register(name, summary string, run ExtraFunc) {
	if name == "" || strings.ContainsAny(name, " \t") || strings.HasPrefix(name, "-") || run == nil {
		panic(fmt.Sprintf("cli.Register: bad command %q", name))
	}
	extraMu.Lock()
	defer extraMu.Unlock()
	if _, dup := extraCommands[name]; dup || isBuiltin(name) {
		panic(fmt.Sprintf("cli.Register: command %q already exists", name))
	}
	extraCommands[name] = extraCommand{summary: summary, run: run}
}

func isBuiltin(name string) bool {
	if _, ok := groups[name]; ok {
		return true
	}
	switch name {
	case "help", "version":
		return true
	}
	for _, c := range commands {
		if c.name == name || strings.HasPrefix(c.name, name+" ") {
			return true
		}
	}
	return false
}

func lookupExtra(name string) (extraCommand, bool) {
	extraMu.Lock()
	defer extraMu.Unlock()
	x, ok := extraCommands[name]
	return x, ok
}

func extraNames() []string {
	extraMu.Lock()
	defer extraMu.Unlock()
	names := make([]string, 0, len(extraCommands))
	for n := range extraCommands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// dispatch finds the command named by the first words of args and runs it.
func (e *env) dispatch(args []string) error {
	if len(args) == 0 {
		return usagef("no command given; run 'outbox help'")
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		return e.help(args[1:])
	case "--version", "-version":
		name = "version"
	}
	if len(args) > 1 {
		if c := lookupCommand(name + " " + args[1]); c != nil {
			return e.runCommand(c, args[2:])
		}
	}
	if c := lookupCommand(name); c != nil {
		return e.runCommand(c, args[1:])
	}
	if _, ok := groups[name]; ok {
		if len(args) == 1 {
			return usagef("%s: missing subcommand (%s); run 'outbox help %s'", name, strings.Join(subcommands(name), ", "), name)
		}
		if isHelpFlag(args[1]) {
			return e.help(args[:1])
		}
		if strings.HasPrefix(args[1], "-") {
			return usagef("%s: put the subcommand (%s) before the flags; run 'outbox help %s'", name, strings.Join(subcommands(name), ", "), name)
		}
		return usagef("%s: unknown subcommand %q; run 'outbox help %s'", name, args[1], name)
	}
	if x, ok := lookupExtra(name); ok {
		if code := x.run(e.ctx, args[1:], e.stdout, e.stderr); code != 0 {
			return exitCode(code)
		}
		return nil
	}
	if strings.HasPrefix(name, "-") {
		return usagef("unknown flag %q before the command; run 'outbox help'", name)
	}
	return usagef("unknown command %q; run 'outbox help'", name)
}

func isHelpFlag(s string) bool {
	switch s {
	case "-h", "-help", "--help":
		return true
	}
	return false
}

// subcommands lists the second words of group's commands.
func subcommands(group string) []string {
	var out []string
	for _, c := range commands {
		if g, sub, ok := strings.Cut(c.name, " "); ok && g == group {
			out = append(out, sub)
		}
	}
	return out
}

// runCommand parses args with c's flags and runs it; --help prints c's
// usage on stdout.
func (e *env) runCommand(c *command, args []string) error {
	fs := flag.NewFlagSet("outbox "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	run := c.setup(fs)
	pos, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printCommandHelp(e.stdout, c, fs)
		return nil
	}
	if err != nil {
		return usagef("%s: %s; run 'outbox help %s'", c.name, cliflag.Error(err), c.name)
	}
	e.warnSecretFlags(fs)
	return run(e, pos)
}

// noArgs rejects positional arguments for commands that take none.
func noArgs(name string, pos []string) error {
	if len(pos) > 0 {
		return usagef("%s: unexpected argument %q; run 'outbox help %s'", name, pos[0], name)
	}
	return nil
}
