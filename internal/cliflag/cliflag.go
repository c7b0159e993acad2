// Package cliflag holds what the outbox command's parts (the commands of
// cmd/outbox/internal/cli and the bench) share in talking to the user: flag help
// printed GNU-style, and errors rendered as one line.
package cliflag

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// ErrorLine renders err as one line without the "outbox: " prefixes that
// library errors carry; the command adds one of its own.
func ErrorLine(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	for strings.HasPrefix(s, "outbox: ") {
		s = strings.TrimPrefix(s, "outbox: ")
	}
	return s
}

// Error words an error of the flag package with the "--name" spelling
// the help uses.
func Error(err error) string {
	s := err.Error()
	if name, ok := strings.CutPrefix(s, "flag provided but not defined: -"); ok {
		return "unknown flag --" + strings.TrimPrefix(name, "-")
	}
	if name, ok := strings.CutPrefix(s, "flag needs an argument: -"); ok {
		return "flag --" + strings.TrimPrefix(name, "-") + " needs a value"
	}
	return strings.Replace(s, " for flag -", " for flag --", 1)
}

// Repeatable is a flag value that may be given more than once; its help
// line ends in "…".
type Repeatable interface {
	flag.Value
	Repeatable()
}

// Print writes fs's flags GNU-style: "--name VALUE", then the usage and
// the default, unless that is empty, zero or false.
func Print(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		switch name {
		case "int":
			name = "N"
		case "float":
			name = "R"
		case "duration":
			name = "DURATION"
		case "string", "value":
			name = "VALUE"
		}
		head := "  --" + f.Name
		if name != "" {
			head += " " + name
		}
		if _, ok := f.Value.(Repeatable); ok {
			head += " …"
		}
		def := ""
		switch f.DefValue {
		case "", "0", "0s", "false":
		default:
			def = " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(w, "%s\n      %s%s\n", head, usage, def)
	})
}
