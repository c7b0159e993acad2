package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/admin"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/seal"
)

// keysAbout is the help shared by the keys commands.
const keysAbout = `The key file is the one the relay's --keys reads (else OUTBOX_KEYS_FILE,
else the config's "keys_file"); docs/security.md describes its format.
Only key ids are printed, never key material.`

// keysFileFlag registers --keys on fs.
func keysFileFlag(fs *flag.FlagSet) *string {
	return fs.String("keys", "", "key `FILE` (default $OUTBOX_KEYS_FILE)")
}

// keysPath is --keys, else OUTBOX_KEYS_FILE, else the config's keys_file.
func (e *env) keysPath(flagVal, cfgVal string) string {
	if flagVal != "" {
		return flagVal
	}
	if v := e.getenv("OUTBOX_KEYS_FILE"); v != "" {
		return v
	}
	return cfgVal
}

// keysFile is the key file a keys command works on: --keys, else
// OUTBOX_KEYS_FILE; a usage error naming the command when neither is set.
func (e *env) keysFile(full, flagVal string) (string, error) {
	p := e.keysPath(flagVal, "")
	if p == "" {
		return "", usagef("%s: give --keys FILE or OUTBOX_KEYS_FILE", full)
	}
	return p, nil
}

func keysNewCommand() *command { return keysChangeCommand("keys new", false) }

func keysRotateCommand() *command { return keysChangeCommand("keys rotate", true) }

// keysChangeCommand is `keys new` (current: false) and `keys rotate`.
func keysChangeCommand(full string, rotate bool) *command {
	summary, about := "add a key to the key file (creating it); the first becomes current",
		"Adds a random 256-bit key named ID (default: the next free kN) to the key\nfile, creating the file (mode 0600) when it does not exist. The first key\nof a file becomes the current one.\n\n"
	if rotate {
		summary, about = "add a key and make it the current one: new messages are sealed under it",
			"Adds a random 256-bit key named ID (default: the next free kN) and makes it\nthe current key: producers seal new messages under it once they read the\nfile again (at their next message); messages sealed under the older keys\nstill open, as long as those keys stay in the file.\n\n"
	}
	return &command{
		name:     full,
		synopsis: "--keys FILE [ID]",
		summary:  summary,
		about:    about + keysAbout,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			path := keysFileFlag(fs)
			return func(e *env, pos []string) error {
				p, err := e.keysFile(full, *path)
				if err != nil {
					return err
				}
				if len(pos) > 1 {
					return usagef("%s: at most one key id", full)
				}
				id := ""
				if len(pos) == 1 {
					id = pos[0]
					if !seal.ValidKeyID(id) {
						return usagef("%s: key id %q: 1-255 printable ASCII characters without spaces", full, id)
					}
				}
				made, err := seal.CreateKey(p, id, rotate)
				if err != nil {
					return fmt.Errorf("%s: %s", full, errorLine(err))
				}
				fmt.Fprintln(e.stdout, made)
				return nil
			}
		},
	}
}

func keysListCommand() *command {
	const full = "keys list"
	return &command{
		name:     full,
		synopsis: "--keys FILE [--json]",
		summary:  "list the key file's keys: ids, current, per subject, created, erased",
		about:    "Lists the keys of the key file, never their material.\n\n" + keysAbout,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			path := keysFileFlag(fs)
			asJSON := fs.Bool("json", false, "print a JSON array")
			return func(e *env, pos []string) error {
				if err := noArgs(full, pos); err != nil {
					return err
				}
				p, err := e.keysFile(full, *path)
				if err != nil {
					return err
				}
				list, err := seal.ListKeys(p)
				if err != nil {
					return fmt.Errorf("%s: %s", full, errorLine(err))
				}
				if *asJSON {
					enc := json.NewEncoder(e.stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(list)
				}
				tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tCURRENT\tSUBJECT\tCREATED\tERASED")
				for _, k := range list {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.ID, yesNo(k.Current), yesNo(k.Subject), when(k.Created), when(k.Erased))
				}
				return tw.Flush()
			}
		},
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "-"
}

func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func keysEraseCommand() *command {
	const full = "keys erase"
	return &command{
		name:     full,
		synopsis: "--keys FILE ID",
		summary:  "erase a key: every message sealed under it becomes unreadable for good",
		about: `Removes the key's material from the key file, keeping its id as erased:
every stored message sealed under it (a data subject's, e.g. customer:42)
can no longer be opened by anyone holding this file. Relays reading the
file dead-letter its pending messages as "erased: key ID no longer
exists", charging no attempt; outbox replay skips them. Copies of the key
file (backups) still hold the key: erase there too. The current key
cannot be erased; rotate first.

` + keysAbout,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			path := keysFileFlag(fs)
			return func(e *env, pos []string) error {
				p, err := e.keysFile(full, *path)
				if err != nil {
					return err
				}
				if len(pos) != 1 {
					return usagef("%s: give one key id", full)
				}
				if err := seal.EraseKey(p, pos[0]); err != nil {
					if errors.Is(err, seal.ErrUnknownKey) {
						return usagef("%s: the key file has no key %s", full, pos[0])
					}
					return fmt.Errorf("%s: %s", full, errorLine(err))
				}
				fmt.Fprintf(e.stdout, "erased %s\n", pos[0])
				return nil
			}
		},
	}
}

// relayKeys opens the relay's key file (--keys, else OUTBOX_KEYS_FILE,
// else the config's keys_file) into rc.Keys. A route that opens sealed
// payloads by its own option (sealed=open) with no key file, or a key
// file that cannot be read, is bad configuration.
func (e *env) relayKeys(r *resolver, flagVal string, rc *outbox.RelayConfig) error {
	path := e.keysPath(flagVal, r.cfg.KeysFile)
	if path == "" {
		for _, rt := range rc.Routes {
			if rt.Sealed == outbox.SealedOpen {
				return usagef("relay: route %s opens sealed payloads (sealed=open) and the relay has no keys: give --keys FILE or OUTBOX_KEYS_FILE", routeName(rt))
			}
		}
		return nil
	}
	keys, err := seal.OpenFileKeys(path)
	if err != nil {
		return usagef("relay: --keys: %s", errorLine(err))
	}
	rc.Keys = keys
	return nil
}

// tokenPermissions applies the config's admin_token_permissions to
// tokens; a permission or token name it does not know is bad
// configuration.
func tokenPermissions(r *resolver, tokens []admin.Token) error {
	for name, perms := range r.cfg.AdminTokenPermissions {
		at := r.cfg.field("admin_token_permissions." + name)
		i := slices.IndexFunc(tokens, func(t admin.Token) bool { return t.Name == name })
		if i < 0 {
			return usagef("%s: no admin token named %q (admin_tokens, or \"admin\" for OUTBOX_ADMIN_TOKEN)", at, name)
		}
		for _, p := range perms {
			if p != admin.PermReadPayloads {
				return usagef("%s: unknown permission %q (want %s)", at, p, admin.PermReadPayloads)
			}
		}
		tokens[i].Permissions = append(tokens[i].Permissions, perms...)
	}
	return nil
}

// shownPayload is a stored payload as the command line shows it: "sealed,
// key K" for a sealed one, which it never opens.
func shownPayload(payload, headers string) *string {
	h := map[string]string{}
	if json.Unmarshal([]byte(headers), &h) == nil {
		if _, keyID, ok := seal.Sealed(h); ok {
			s := seal.Describe(keyID)
			return &s
		}
	}
	return &payload
}

// skipErased narrows a replay's filter to messages not sealed under a
// key erased from the key file (flagVal, else OUTBOX_KEYS_FILE), and
// returns how many it leaves out. Without a key file it changes nothing.
func (e *env) skipErased(st *store.Store, full, flagVal string, f *store.BulkFilter) (int64, error) {
	path := e.keysPath(flagVal, "")
	if path == "" {
		return 0, nil
	}
	list, err := seal.ListKeys(path)
	if err != nil {
		return 0, usagef("%s: --keys: %s", full, errorLine(err))
	}
	var erased []string
	for _, k := range list {
		if k.Erased != nil {
			erased = append(erased, k.ID)
		}
	}
	if len(erased) == 0 {
		return 0, nil
	}
	if len(erased) > store.MaxTopics {
		return 0, usagef("%s: the key file has %d erased keys, more than a replay can leave out (%d)", full, len(erased), store.MaxTopics)
	}
	all, err := st.CountBulk(e.ctx, store.ActionReplay, *f)
	if err != nil {
		return 0, err
	}
	f.NotSealedUnder = erased
	kept, err := st.CountBulk(e.ctx, store.ActionReplay, *f)
	if err != nil {
		return 0, err
	}
	return all - kept, nil
}

// adminKeys opens the key file of `outbox admin` (OUTBOX_KEYS_FILE, else
// the config's keys_file), with which tokens holding the read-payloads
// permission see sealed payloads; nil without one.
func (e *env) adminKeys(r *resolver) (seal.KeyProvider, error) {
	path := e.keysPath("", r.cfg.KeysFile)
	if path == "" {
		return nil, nil
	}
	keys, err := seal.OpenFileKeys(path)
	if err != nil {
		return nil, usagef("admin: OUTBOX_KEYS_FILE: %s", errorLine(err))
	}
	return keys, nil
}

// enqueueSeal is the seal configuration of `outbox enqueue --seal`: the
// key file of --keys, else OUTBOX_KEYS_FILE, else the config's
// keys_file; nil when sealIt is false.
func (e *env) enqueueSeal(sealIt bool, flagVal, cfgVal string) (*outbox.SealConfig, error) {
	path := e.keysPath(flagVal, cfgVal)
	if !sealIt {
		if flagVal != "" {
			return nil, usagef("enqueue: --keys needs --seal or --seal-subject")
		}
		return nil, nil
	}
	if path == "" {
		return nil, usagef("enqueue: --seal needs the key file: give --keys FILE or OUTBOX_KEYS_FILE")
	}
	keys, err := seal.OpenFileKeys(path)
	if err != nil {
		return nil, usagef("enqueue: --keys: %s", errorLine(err))
	}
	return &outbox.SealConfig{Keys: keys}, nil
}
