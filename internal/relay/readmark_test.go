package relay

import (
	"context"

	"github.com/txoutbox/outbox/internal/store"
)

// ReadMark serves the fake's rows as Read does; its marks are not kept.
func (f *fakeStore) ReadMark(ctx context.Context, _ string, parts []int, limit int) ([]store.Row, error) {
	return f.Read(ctx, parts, limit)
}
