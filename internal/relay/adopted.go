package relay

import "github.com/txoutbox/outbox/internal/store"

// WrapStore, set by package outbox, makes the relay that outbox.NewRelay
// builds from cfg (an *outbox.RelayConfig) run on the store wrap returns
// over its backend's store instead: the command's `relay --adopt`, which
// reads a table the application already writes.
var WrapStore func(cfg any, wrap func(*store.Store) Store)

var _ Store = (*store.Adopted)(nil)
