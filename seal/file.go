package seal

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FileKeys is a KeyProvider over a key file (docs/security.md, "Key
// file"): a JSON object
//
//	{"version": 1, "current": "k2", "keys": [
//	  {"id": "k1", "secret": "<base64 of 32 bytes>", "created": "2026-01-02T03:04:05Z"},
//	  {"id": "k2", "secret": "…", "created": "…"},
//	  {"id": "customer:42", "secret": "…", "subject": true, "created": "…"},
//	  {"id": "customer:7", "erased": "2026-03-04T05:06:07Z"}
//	]}
//
// An erased key keeps its id and loses its secret, so that what it sealed
// is told apart from a key that never existed. The file is re-read
// whenever it changes on disk, so a running relay sees rotations and
// erasures made by `outbox keys` at its next message. Changes lock
// FILE.lock and replace the file whole (written aside, then renamed),
// mode 0600.
type FileKeys struct {
	path string

	mu    sync.Mutex
	stamp fileStamp
	doc   keyFile
	byID  map[string]*fileKey
}

type keyFile struct {
	Version int        `json:"version"`
	Current string     `json:"current,omitempty"`
	Keys    []*fileKey `json:"keys"`
}

type fileKey struct {
	ID      string     `json:"id"`
	Secret  string     `json:"secret,omitempty"`
	Subject bool       `json:"subject,omitempty"`
	Created *time.Time `json:"created,omitempty"`
	Erased  *time.Time `json:"erased,omitempty"`
}

// fileStamp tells the file's versions apart: every change renames a new
// file into place, so a different file (inode) is a new version even
// within the modification time's granularity.
type fileStamp struct {
	fi   os.FileInfo
	mod  time.Time
	size int64
}

func (a fileStamp) same(b fileStamp) bool {
	return a.fi != nil && b.fi != nil && os.SameFile(a.fi, b.fi) && a.mod.Equal(b.mod) && a.size == b.size
}

// KeyInfo describes a key of a file without its material.
type KeyInfo struct {
	ID      string     `json:"id"`
	Current bool       `json:"current"`
	Subject bool       `json:"subject"`
	Created *time.Time `json:"created,omitempty"`
	Erased  *time.Time `json:"erased,omitempty"`
}

// OpenFileKeys opens the key file at path, which must exist and hold a
// current key (see CreateKey).
func OpenFileKeys(path string) (*FileKeys, error) {
	f := &FileKeys{path: path}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.reload(true); err != nil {
		return nil, err
	}
	if f.doc.Current == "" {
		return nil, fmt.Errorf("seal: key file %s has no current key (outbox keys rotate)", path)
	}
	return f, nil
}

// Path is the file's name.
func (f *FileKeys) Path() string { return f.path }

// reload reads the file again when its stamp changed (always with force).
// f.mu is held.
func (f *FileKeys) reload(force bool) error {
	st, err := os.Stat(f.path)
	if err != nil {
		return fmt.Errorf("seal: key file: %w", err)
	}
	stamp := fileStamp{fi: st, mod: st.ModTime(), size: st.Size()}
	if !force && stamp.same(f.stamp) {
		return nil
	}
	doc, err := readKeyFile(f.path)
	if err != nil {
		return err
	}
	f.doc, f.stamp = doc, stamp
	f.byID = make(map[string]*fileKey, len(doc.Keys))
	for _, k := range doc.Keys {
		f.byID[k.ID] = k
	}
	return nil
}

func readKeyFile(path string) (keyFile, error) {
	var doc keyFile
	b, err := os.ReadFile(path)
	if err != nil {
		return doc, fmt.Errorf("seal: key file: %w", err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		// The decoder's message may quote the file; say where only.
		return doc, fmt.Errorf("seal: key file %s is not a key file (JSON object with version and keys)", path)
	}
	if doc.Version != 1 {
		return doc, fmt.Errorf("seal: key file %s: version %d, want 1", path, doc.Version)
	}
	seen := map[string]bool{}
	for i, k := range doc.Keys {
		if k == nil || !ValidKeyID(k.ID) {
			return doc, fmt.Errorf("seal: key file %s: keys[%d]: bad or missing id", path, i)
		}
		if seen[k.ID] {
			return doc, fmt.Errorf("seal: key file %s: key %s appears twice", path, k.ID)
		}
		seen[k.ID] = true
		if k.Erased != nil {
			continue
		}
		if s, err := base64.StdEncoding.DecodeString(k.Secret); err != nil || len(s) != KeySize {
			return doc, fmt.Errorf("seal: key file %s: key %s: secret is not the base64 of %d bytes", path, k.ID, KeySize)
		}
	}
	if doc.Current != "" {
		if k := findKey(doc.Keys, doc.Current); k == nil || k.Erased != nil {
			return doc, fmt.Errorf("seal: key file %s: current key %s is missing or erased", path, doc.Current)
		}
	}
	return doc, nil
}

func findKey(keys []*fileKey, id string) *fileKey {
	for _, k := range keys {
		if k.ID == id {
			return k
		}
	}
	return nil
}

func (k *fileKey) key() Key {
	s, _ := base64.StdEncoding.DecodeString(k.Secret) // checked on read
	return Key{ID: k.ID, Secret: s}
}

// Current returns the current key.
func (f *FileKeys) Current(context.Context) (Key, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.reload(false); err != nil {
		return Key{}, err
	}
	k := f.byID[f.doc.Current]
	if k == nil {
		return Key{}, fmt.Errorf("seal: key file %s has no current key", f.path)
	}
	return k.key(), nil
}

// Key returns the key of id.
func (f *FileKeys) Key(_ context.Context, id string) (Key, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.reload(false); err != nil {
		return Key{}, err
	}
	return f.lookup(id)
}

func (f *FileKeys) lookup(id string) (Key, error) {
	k := f.byID[id]
	switch {
	case k == nil:
		return Key{}, fmt.Errorf("%w %s", ErrUnknownKey, id)
	case k.Erased != nil:
		return Key{}, fmt.Errorf("%w: key %s no longer exists", ErrErased, id)
	}
	return k.key(), nil
}

// SubjectKey returns the key of subject, creating it in the file on first
// use.
func (f *FileKeys) SubjectKey(ctx context.Context, subject string) (Key, error) {
	if !ValidKeyID(subject) {
		return Key{}, fmt.Errorf("%w: bad subject %q", ErrInvalidKey, subject)
	}
	if k, err := f.Key(ctx, subject); !errors.Is(err, ErrUnknownKey) {
		return k, err
	}
	var out Key
	err := f.change(func(doc *keyFile) error {
		if k := findKey(doc.Keys, subject); k != nil {
			if k.Erased != nil {
				return fmt.Errorf("%w: key %s no longer exists", ErrErased, subject)
			}
			out = k.key()
			return nil
		}
		k, err := NewKey(subject)
		if err != nil {
			return err
		}
		now := time.Now().UTC().Truncate(time.Second)
		doc.Keys = append(doc.Keys, &fileKey{ID: subject, Secret: base64.StdEncoding.EncodeToString(k.Secret), Subject: true, Created: &now})
		out = k
		return nil
	})
	return out, err
}

// List describes the file's keys, without their material, in id order.
func (f *FileKeys) List() ([]KeyInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.reload(false); err != nil {
		return nil, err
	}
	return listOf(&f.doc), nil
}

func listOf(doc *keyFile) []KeyInfo {
	out := make([]KeyInfo, 0, len(doc.Keys))
	for _, k := range doc.Keys {
		out = append(out, KeyInfo{ID: k.ID, Current: k.ID == doc.Current, Subject: k.Subject, Created: k.Created, Erased: k.Erased})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// CreateKey adds a new random key to the file at path, creating the file
// when it does not exist. id "" picks the next free "kN". The key becomes
// the current one when current is set or the file had none. It returns
// the key's id.
func CreateKey(path, id string, current bool) (string, error) {
	f := &FileKeys{path: path}
	var made string
	err := f.change(func(doc *keyFile) error {
		if id == "" {
			id = nextID(doc)
		}
		if findKey(doc.Keys, id) != nil {
			return fmt.Errorf("seal: key file %s already has a key %s", path, id)
		}
		k, err := NewKey(id)
		if err != nil {
			return err
		}
		now := time.Now().UTC().Truncate(time.Second)
		doc.Keys = append(doc.Keys, &fileKey{ID: id, Secret: base64.StdEncoding.EncodeToString(k.Secret), Created: &now})
		if current || doc.Current == "" {
			doc.Current = id
		}
		made = id
		return nil
	})
	return made, err
}

// nextID is "k" and one more than the highest kN of doc.
func nextID(doc *keyFile) string {
	n := 0
	for _, k := range doc.Keys {
		if v, err := strconv.Atoi(strings.TrimPrefix(k.ID, "k")); err == nil && strings.HasPrefix(k.ID, "k") && v > n {
			n = v
		}
	}
	return "k" + strconv.Itoa(n+1)
}

// EraseKey erases the key of id from the file at path: its secret is
// removed, its id kept as erased. The current key cannot be erased
// (rotate first).
func EraseKey(path, id string) error {
	f := &FileKeys{path: path}
	return f.change(func(doc *keyFile) error {
		k := findKey(doc.Keys, id)
		switch {
		case k == nil:
			return fmt.Errorf("%w %s", ErrUnknownKey, id)
		case k.Erased != nil:
			return nil
		case doc.Current == id:
			return fmt.Errorf("seal: key %s is the current key: rotate to a new one before erasing it", id)
		}
		now := time.Now().UTC().Truncate(time.Second)
		k.Secret, k.Erased = "", &now
		return nil
	})
}

// ListKeys describes the keys of the file at path.
func ListKeys(path string) ([]KeyInfo, error) {
	doc, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	return listOf(&doc), nil
}

// change applies edit to the file under its lock and writes the result
// (creating the file when it does not exist).
func (f *FileKeys) change(edit func(*keyFile) error) error {
	unlock, err := lockFile(f.path + ".lock")
	if err != nil {
		return fmt.Errorf("seal: key file lock: %w", err)
	}
	defer unlock()
	doc, err := readKeyFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		doc, err = keyFile{Version: 1}, nil
	}
	if err != nil {
		return err
	}
	if err := edit(&doc); err != nil {
		return err
	}
	b, err := json.MarshalIndent(&doc, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.path), filepath.Base(f.path)+".tmp*")
	if err != nil {
		return fmt.Errorf("seal: key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("seal: key file: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("seal: key file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("seal: key file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("seal: key file: %w", err)
	}
	if err := os.Rename(tmp.Name(), f.path); err != nil {
		return fmt.Errorf("seal: key file: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reload(true)
}
