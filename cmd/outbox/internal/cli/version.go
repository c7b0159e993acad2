package cli

import (
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is the release this binary reports; set it at build time with
// -ldflags "-X github.com/txoutbox/outbox/internal/cli.Version=v1.2.3".
// When empty, the module version recorded by the Go toolchain is used
// (the tag for 'go install …@v1.2.3', a pseudo-version from the commit
// for a 'go build' in a clone).
var Version = ""

// buildInfo is what the binary knows about its own build.
type buildInfo struct {
	version  string // v1.2.3, a pseudo-version, or (devel)
	revision string // the VCS commit, "" when not recorded
	time     string // the commit's time (RFC 3339), "" when not recorded
	modified bool   // the work tree had uncommitted changes
	goVer    string
}

// readBuildInfo reads the module version and the VCS stamp the Go
// toolchain records (runtime/debug.ReadBuildInfo).
func readBuildInfo() buildInfo {
	b := buildInfo{version: "(devel)", goVer: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		if bi.Main.Version != "" {
			b.version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.revision = s.Value
			case "vcs.time":
				b.time = s.Value
			case "vcs.modified":
				b.modified = s.Value == "true"
			}
		}
	}
	if Version != "" {
		b.version = Version
	}
	return b
}

// String is the version line: "outbox v1.2.3 (commit 0123abcd…, 2026-01-31T12:00:00Z;
// go1.26 linux/amd64)".
func (b buildInfo) String() string {
	var parts []string
	if b.revision != "" {
		c := "commit " + b.revision
		if b.time != "" {
			c += ", " + b.time
		}
		if b.modified {
			c += ", modified"
		}
		parts = append(parts, c)
	}
	parts = append(parts, b.goVer+" "+runtime.GOOS+"/"+runtime.GOARCH)
	return "outbox " + b.version + " (" + strings.Join(parts, "; ") + ")"
}

func versionCommand() *command {
	return &command{
		name:     "version",
		synopsis: "",
		summary:  "print the version",
		about: `Prints the outbox version (the module version: a release tag, or a
pseudo-version naming the commit for a build from a clone), the commit and
its date the binary was built from, whether the work tree had uncommitted
changes ("modified"), and the Go version and platform. 'outbox --version'
is the same.`,
		setup: func(*flag.FlagSet) func(*env, []string) error {
			return func(e *env, pos []string) error {
				if err := noArgs("version", pos); err != nil {
					return err
				}
				fmt.Fprintln(e.stdout, readBuildInfo())
				return nil
			}
		},
	}
}
