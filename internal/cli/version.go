package cli

import (
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release this binary reports; set it at build time with
// -ldflags "-X github.com/txoutbox/outbox/internal/cli.Version=v1.2.3".
// When empty, the module version recorded by the Go toolchain is used.
var Version = ""

// version returns the binary's version.
func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

func versionCommand() *command {
	return &command{
		name:     "version",
		synopsis: "",
		summary:  "print the version",
		about:    "Prints the outbox version and the Go version it was built with.",
		setup: func(*flag.FlagSet) func(*env, []string) error {
			return func(e *env, pos []string) error {
				if err := noArgs("version", pos); err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "outbox %s (%s, %s/%s)\n", version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
				return nil
			}
		},
	}
}
