package claimcheck

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// tempPrefix starts the names of Dir's files being written; no key does
// (a key starts with a letter or digit).
const tempPrefix = ".tmp-"

// Dir is a Store over a local directory: one file per blob, named by its
// key, mode 0600. It suits one host (SQLite, tests, a volume shared by
// the producers and the relay); its scheme is "file".
//
// Put writes a temporary file in the directory, syncs it, renames it to
// the key and syncs the directory, so a blob is either whole under its
// key or absent, also across a crash. Temporary files left by a crash
// are removed by List once older than its bound.
type Dir struct {
	path string
}

// OpenDir returns the Store over the directory path, creating it (mode
// 0700) when missing.
func OpenDir(path string) (*Dir, error) {
	if path == "" {
		return nil, errors.New("claimcheck: OpenDir: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("claimcheck: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("claimcheck: %w", err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("claimcheck: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("claimcheck: %s is not a directory", abs)
	}
	return &Dir{path: abs}, nil
}

// Path is the directory.
func (d *Dir) Path() string { return d.path }

// Scheme is "file".
func (d *Dir) Scheme() string { return "file" }

// Put writes data under key atomically and durably.
func (d *Dir) Put(ctx context.Context, key string, data []byte) (err error) {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := os.CreateTemp(d.path, tempPrefix+"*")
	if err != nil {
		return fmt.Errorf("claimcheck: put %s: %w", key, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("claimcheck: put %s: %w", key, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("claimcheck: put %s: %w", key, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("claimcheck: put %s: %w", key, err)
	}
	if err = os.Rename(tmp, filepath.Join(d.path, key)); err != nil {
		return fmt.Errorf("claimcheck: put %s: %w", key, err)
	}
	if err = d.syncDir(); err != nil {
		return fmt.Errorf("claimcheck: put %s: %w", key, err)
	}
	return nil
}

// syncDir makes the directory's entries (a rename, a removal) durable.
func (d *Dir) syncDir() error {
	f, err := os.Open(d.path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	return nil
}

// Get reads the blob under key.
func (d *Dir) Get(ctx context.Context, key string) ([]byte, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(d.path, key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err != nil {
		return nil, fmt.Errorf("claimcheck: get %s: %w", key, err)
	}
	return b, nil
}

// Delete removes the blob under key, if any.
func (d *Dir) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(d.path, key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("claimcheck: delete %s: %w", key, err)
	}
	return nil
}

// List calls fn with every blob's key whose file was last modified before
// olderThan, and removes the temporary files of writes older than that
// (left by a crash). Files whose names are no keys are left alone.
func (d *Dir) List(ctx context.Context, olderThan time.Time, fn func(key string) error) error {
	entries, err := os.ReadDir(d.path)
	if err != nil {
		return fmt.Errorf("claimcheck: list: %w", err)
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !e.Type().IsRegular() {
			continue
		}
		name := e.Name()
		temp := strings.HasPrefix(name, tempPrefix)
		if !temp && !ValidKey(name) {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile
		}
		if err != nil {
			return fmt.Errorf("claimcheck: list: %w", err)
		}
		if !info.ModTime().Before(olderThan) {
			continue
		}
		if temp {
			_ = os.Remove(filepath.Join(d.path, name))
			continue
		}
		if err := fn(name); err != nil {
			return err
		}
	}
	return nil
}

var _ Store = (*Dir)(nil)
