package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestCompletionScriptsParse: each shell's script is valid syntax for that
// shell (bash -n, zsh -n, fish -n) and names every command and flag of the
// command table. In CI all three shells are required (scripts/shells.sh
// installs zsh and fish); elsewhere a missing zsh or fish is skipped.
func TestCompletionScriptsParse(t *testing.T) {
	t.Parallel()
	spec := completionSpec()
	for _, sh := range shells {
		t.Run(sh, func(t *testing.T) {
			t.Parallel()
			script := run(t, nil, "completion", sh).ok(t).stdout
			for _, c := range commands {
				for _, w := range strings.Fields(c.name) {
					if !strings.Contains(script, w) {
						t.Errorf("the %s script does not name %q", sh, w)
					}
				}
			}
			for _, p := range spec.paths {
				for _, f := range spec.flags[p] {
					if !strings.Contains(script, f.name) {
						t.Errorf("the %s script does not name --%s of %s", sh, f.name, p)
					}
				}
			}
			bin, err := exec.LookPath(sh)
			if err != nil {
				if sh == "bash" || os.Getenv("CI") == "true" {
					t.Fatalf("%s is not installed (scripts/shells.sh installs zsh and fish)", sh)
				}
				t.Skipf("%s is not installed (scripts/shells.sh installs it); its script was not parsed", sh)
			}
			path := filepath.Join(t.TempDir(), "outbox."+sh)
			if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(bin, "-n", path).CombinedOutput(); err != nil {
				t.Fatalf("%s -n: %v\n%s", sh, err, out)
			}
		})
	}
}

// TestBashCompletes runs the bash script's completion function on command
// lines and checks what it offers.
func TestBashCompletes(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "outbox.bash")
	if err := os.WriteFile(path, []byte(run(t, nil, "completion", "bash").ok(t).stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		line string // the words; the last one is being completed
		want []string
		not  []string
	}{
		{"outbox ", []string{"migrate", "relay", "dead", "replay", "completion", "version", "help"}, nil},
		{"outbox re", []string{"relay", "replay"}, []string{"migrate"}},
		{"outbox dead ", []string{"list", "requeue", "discard"}, []string{"--topic"}},
		{"outbox dead list --", []string{"--topic", "--json", "--with-payload", "--db"}, []string{"--all"}},
		{"outbox replay --", []string{"--id", "--topic", "--key", "--since", "--until", "--archive", "--dry-run", "--yes"}, nil},
		{"outbox replay --status ", []string{"sent", "consumed"}, []string{"dead"}},
		{"outbox migrate sql --dialect ", []string{"postgres", "mysql", "sqlite"}, nil},
		{"outbox migrate --", []string{"--db"}, []string{"--dialect"}},
		{"outbox migrate ", []string{"sql"}, nil},
		{"outbox completion ", []string{"bash", "zsh", "fish"}, nil},
		{"outbox help de", []string{"dead"}, nil},
	}
	for _, c := range cases {
		t.Run(c.line, func(t *testing.T) {
			t.Parallel()
			words := strings.Split(c.line, " ")
			quoted := make([]string, len(words))
			for i, w := range words {
				quoted[i] = "'" + w + "'"
			}
			prog := "source " + path + "; COMP_WORDS=(" + strings.Join(quoted, " ") + "); COMP_CWORD=" +
				strconv.Itoa(len(words)-1) + "; _outbox; printf '%s\\n' \"${COMPREPLY[@]}\""
			out, err := exec.Command("bash", "--norc", "--noprofile", "-c", prog).CombinedOutput()
			if err != nil {
				t.Fatalf("bash: %v\n%s", err, out)
			}
			got := strings.Fields(string(out))
			for _, w := range c.want {
				if !slices.Contains(got, w) {
					t.Errorf("%q offers %v, missing %q", c.line, got, w)
				}
			}
			for _, w := range c.not {
				if slices.Contains(got, w) {
					t.Errorf("%q offers %q: %v", c.line, w, got)
				}
			}
		})
	}
	run(t, nil, "completion", "tcsh").failed(t, ExitUsage, `unknown shell "tcsh"`)
	run(t, nil, "completion").failed(t, ExitUsage, "name one shell")
}

// TestFishCompletes asks fish itself for the completions of command lines
// with the fish script loaded, when fish is installed (scripts/shells.sh
// installs it; CI requires it).
func TestFishCompletes(t *testing.T) {
	t.Parallel()
	fish, err := exec.LookPath("fish")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("fish is not installed (scripts/shells.sh installs it)")
		}
		t.Skip("fish is not installed (scripts/shells.sh installs it)")
	}
	path := filepath.Join(t.TempDir(), "outbox.fish")
	if err := os.WriteFile(path, []byte(run(t, nil, "completion", "fish").ok(t).stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	for line, want := range map[string][]string{
		"outbox dead ":                  {"discard", "list", "requeue"},
		"outbox replay --st":            {"--status"},
		"outbox replay --status ":       {"consumed", "sent"},
		"outbox migrate sql --dialect ": {"mysql", "postgres", "sqlite"},
	} {
		cmd := exec.Command(fish, "--no-config", "-c", "source "+path+"; complete -C'"+line+"'")
		cmd.Dir = t.TempDir() // no files to offer
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("fish: %v\n%s", err, out)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			got = append(got, strings.Fields(l)[0])
		}
		if !slices.Equal(got, want) {
			t.Errorf("fish completes %q with %q, want %q", line, got, want)
		}
	}
}
