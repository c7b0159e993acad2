//go:build !linux

package relay

import (
	"context"
	"errors"
)

// watchFiles is not available on this platform: the relay probes every
// ProbeInterval instead.
func watchFiles(context.Context, string, func()) error {
	return errors.New("no file watch on this platform")
}
