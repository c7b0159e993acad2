package cli

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// shells are the shells 'outbox completion' writes scripts for.
var shells = []string{"bash", "zsh", "fish"}

// flagChoices are the values a flag takes, by "command --flag" or, for
// every command, by "--flag".
var flagChoices = map[string][]string{
	"--dialect":       {"postgres", "mysql", "sqlite"},
	"--log-level":     {"debug", "info", "warn", "error"},
	"--log-format":    {"text", "json"},
	"replay --status": {"sent", "consumed"},
}

// compFlag is one flag as completion sees it.
type compFlag struct {
	name    string   // "topic"
	value   bool     // takes a value
	file    bool     // the value is a file name
	choices []string // the values it takes, when known
}

// compSpec is the command line's shape, read from the command table and
// each command's own flag set: the scripts are generated from it, so a new
// command or flag completes without touching them.
type compSpec struct {
	top   []string              // first words, in help order
	subs  map[string][]string   // second words after a first word
	flags map[string][]compFlag // by command ("dead list")
	paths []string              // the commands with flags, in help order
}

func completionSpec() compSpec {
	s := compSpec{subs: map[string][]string{}, flags: map[string][]compFlag{}}
	addTop := func(w string) {
		if !slices.Contains(s.top, w) {
			s.top = append(s.top, w)
		}
	}
	for _, c := range commands {
		first, second, two := strings.Cut(c.name, " ")
		addTop(first)
		if two {
			s.subs[first] = append(s.subs[first], second)
		}
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.setup(fs)
		var flags []compFlag
		fs.VisitAll(func(f *flag.Flag) {
			placeholder, _ := flag.UnquoteUsage(f)
			b, isBool := f.Value.(interface{ IsBoolFlag() bool })
			cf := compFlag{name: f.Name, value: !isBool || !b.IsBoolFlag(), file: placeholder == "FILE"}
			cf.choices = flagChoices[c.name+" --"+f.Name]
			if cf.choices == nil {
				cf.choices = flagChoices["--"+f.Name]
			}
			flags = append(flags, cf)
		})
		if len(flags) > 0 {
			s.flags[c.name] = flags
			s.paths = append(s.paths, c.name)
		}
	}
	for _, n := range extraNames() {
		addTop(n)
	}
	addTop("help")
	s.subs["help"] = slices.DeleteFunc(slices.Clone(s.top), func(w string) bool { return w == "help" })
	s.subs["completion"] = shells
	return s
}

func completionCommand() *command {
	return &command{
		name:     "completion",
		synopsis: "bash|zsh|fish",
		summary:  "print a shell completion script",
		about: `Prints a completion script for bash, zsh or fish that completes the
commands, subcommands and flags (and the values of --dialect, --log-level,
--log-format and file flags). Load it with, for example:

  bash: source <(outbox completion bash)   (or save it in
        /etc/bash_completion.d/outbox)
  zsh:  outbox completion zsh > "${fpath[1]}/_outbox"   (with compinit loaded)
  fish: outbox completion fish > ~/.config/fish/completions/outbox.fish`,
		setup: func(*flag.FlagSet) func(*env, []string) error {
			return func(e *env, pos []string) error {
				if len(pos) != 1 {
					return usagef("completion: name one shell: %s", strings.Join(shells, ", "))
				}
				s := completionSpec()
				switch pos[0] {
				case "bash":
					s.caseScript(e.stdout, bashShell)
				case "zsh":
					s.caseScript(e.stdout, zshShell)
				case "fish":
					s.fish(e.stdout)
				default:
					return usagef("completion: unknown shell %q (want %s)", pos[0], strings.Join(shells, ", "))
				}
				return nil
			}
		},
	}
}

// flagWords lists a command's flags as "--name" words.
func flagWords(flags []compFlag) string {
	w := make([]string, len(flags))
	for i, f := range flags {
		w[i] = "--" + f.name
	}
	return strings.Join(w, " ")
}

// valueCases writes one shell case per flag value that completes: its
// choices or file names, in the shell's syntax (pattern "path|--flag").
func (s compSpec) valueCases(w io.Writer, choices, files func(pattern, words string) string) {
	for _, p := range s.paths {
		for _, f := range s.flags[p] {
			switch {
			case len(f.choices) > 0:
				fmt.Fprint(w, choices(p+"|--"+f.name, strings.Join(f.choices, " ")))
			case f.file:
				fmt.Fprint(w, files(p+"|--"+f.name, ""))
			}
		}
	}
}

// caseShell is the syntax of a shell whose script is a function with case
// statements (bash, zsh).
type caseShell struct {
	head, tail string
	word       func(n int) string // the command line's word n (0: outbox)
	at         func(n int) string // test: the word being completed is word n
	cur, prev  string             // the word being completed, and the one before
	offer      func(words string) string
	files      string // offers file names
}

var (
	bashShell = caseShell{
		head:  "# bash completion for outbox (outbox completion bash)\n_outbox() {\n",
		tail:  "}\ncomplete -o default -F _outbox outbox\n",
		word:  func(n int) string { return fmt.Sprintf("${COMP_WORDS[%d]}", n) },
		at:    func(n int) string { return fmt.Sprintf("(( COMP_CWORD == %d ))", n) },
		cur:   "${COMP_WORDS[COMP_CWORD]}",
		prev:  "${COMP_WORDS[COMP_CWORD-1]}",
		offer: func(words string) string { return fmt.Sprintf("COMPREPLY=($(compgen -W %q -- \"$cur\"))", words) },
		files: `COMPREPLY=($(compgen -f -- "$cur"))`,
	}
	zshShell = caseShell{
		head:  "#compdef outbox\n# zsh completion for outbox (outbox completion zsh)\n_outbox() {\n",
		tail:  "}\nif [ \"$funcstack[1]\" = \"_outbox\" ]; then\n    _outbox \"$@\"\nelse\n    compdef _outbox outbox\nfi\n",
		word:  func(n int) string { return fmt.Sprintf("${words[%d]}", n+1) },
		at:    func(n int) string { return fmt.Sprintf("(( CURRENT == %d ))", n+1) },
		cur:   "${words[CURRENT]}",
		prev:  "${words[CURRENT-1]}",
		offer: func(words string) string { return "compadd -- " + words },
		files: "_files",
	}
)

// caseScript writes the completion function for sh: first words, second
// words, flag values, then the command's flags.
func (s compSpec) caseScript(w io.Writer, sh caseShell) {
	fmt.Fprint(w, sh.head)
	fmt.Fprintf(w, "    local cur=%s cmd=%s\n", sh.cur, sh.word(1))
	fmt.Fprintf(w, "    if %s; then\n        %s\n        return\n    fi\n    case \"$cmd\" in\n", sh.at(1), sh.offer(strings.Join(s.top, " ")))
	for _, top := range s.top {
		if subs := strings.Join(s.subs[top], " "); subs != "" {
			fmt.Fprintf(w, "    %s)\n        if %s && [[ $cur != -* ]]; then\n            %s\n            return\n        fi\n", top, sh.at(2), sh.offer(subs))
			fmt.Fprintf(w, "        case \" %s \" in *\" %s \"*) cmd=\"%s %s\" ;; esac ;;\n", subs, sh.word(2), top, sh.word(2))
		}
	}
	fmt.Fprintf(w, "    esac\n    case \"$cmd|%s\" in\n", sh.prev)
	s.valueCases(w, func(p, words string) string {
		return fmt.Sprintf("    %q) %s; return ;;\n", p, sh.offer(words))
	}, func(p, _ string) string {
		return fmt.Sprintf("    %q) %s; return ;;\n", p, sh.files)
	})
	fmt.Fprint(w, "    esac\n    case \"$cmd\" in\n")
	for _, p := range s.paths {
		fmt.Fprintf(w, "    %q) %s ;;\n", p, sh.offer(flagWords(s.flags[p])))
	}
	fmt.Fprint(w, "    esac\n", sh.tail)
}

func (s compSpec) fish(w io.Writer) {
	fmt.Fprintf(w, "# fish completion for outbox (outbox completion fish)\ncomplete -c outbox -f\n")
	fmt.Fprintf(w, "complete -c outbox -n __fish_use_subcommand -a %q\n", strings.Join(s.top, " "))
	for _, top := range s.top {
		if subs := s.subs[top]; len(subs) > 0 {
			fmt.Fprintf(w, "complete -c outbox -n '__fish_seen_subcommand_from %s; and not __fish_seen_subcommand_from %s' -a %q\n",
				top, strings.Join(subs, " "), strings.Join(subs, " "))
		}
	}
	for _, p := range s.paths {
		cond := "__fish_seen_subcommand_from " + p
		if top, sub, ok := strings.Cut(p, " "); ok {
			cond = "__fish_seen_subcommand_from " + top + "; and __fish_seen_subcommand_from " + sub
		} else if subs := s.subs[p]; len(subs) > 0 {
			cond += "; and not __fish_seen_subcommand_from " + strings.Join(subs, " ")
		}
		for _, f := range s.flags[p] {
			opts := ""
			switch {
			case len(f.choices) > 0:
				opts = fmt.Sprintf(" -x -a %q", strings.Join(f.choices, " "))
			case f.file:
				opts = " -r -F"
			case f.value:
				opts = " -x" // a value, but no file name
			}
			fmt.Fprintf(w, "complete -c outbox -n '%s' -l %s%s\n", cond, f.name, opts)
		}
	}
}
