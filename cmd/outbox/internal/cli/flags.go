package cli

import (
	"flag"
	"io"
	"strings"

	"github.com/txoutbox/outbox/internal/cliflag"
)

// parseArgs parses args with fs, allowing flags after positional words
// ("outbox dead requeue --id X" and "outbox dead requeue X --json" alike).
// A "--" ends the flags; everything after it is positional.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" && !isValueOf(fs, args, used-1) {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// isValueOf reports whether args[i] is the value of the flag before it
// ("--payload --"), rather than the end-of-flags marker.
func isValueOf(fs *flag.FlagSet, args []string, i int) bool {
	if i == 0 {
		return false
	}
	prev := strings.TrimLeft(args[i-1], "-")
	if !strings.HasPrefix(args[i-1], "-") || strings.Contains(prev, "=") {
		return false
	}
	f := fs.Lookup(prev)
	if f == nil {
		return false
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return false
	}
	return true
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// Repeatable marks the flag as one that may be given more than once.
func (l *listFlag) Repeatable() {}

// setFlags returns the names of the flags given on the command line.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// printFlags writes fs's flags GNU-style: "--name VALUE", then the usage.
func printFlags(w io.Writer, fs *flag.FlagSet) { cliflag.Print(w, fs) }
