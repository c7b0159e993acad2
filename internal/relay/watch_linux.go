package relay

import (
	"context"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// watchFiles calls changed whenever the file at path (a SQLite
// database) or its write-ahead log is written, until ctx is done: an
// inotify watch on their directory, so that the relay probes the table
// only when another process committed something, instead of every
// ProbeInterval.
func watchFiles(ctx context.Context, path string, changed func()) error {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), "inotify")
	defer f.Close()
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_MODIFY|unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = f.Close() })
	defer stop()
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := f.Read(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		hit := false
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := ""
			if ev.Len > 0 {
				b := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
				for i, c := range b {
					if c == 0 {
						b = b[:i]
						break
					}
				}
				name = string(b)
			}
			if name == base || name == base+"-wal" {
				hit = true
			}
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				hit = true
			}
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
		if hit {
			changed()
		}
	}
}
