package relay

import "github.com/txoutbox/outbox/internal/store"

var _ Store = (*store.Adopted)(nil)
