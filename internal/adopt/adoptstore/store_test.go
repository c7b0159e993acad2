package adoptstore_test

import (
	"github.com/txoutbox/outbox/internal/adopt/adoptstore"
	"github.com/txoutbox/outbox/internal/relay"
)

// The store is the engine's Store over an adopted table (the relay and
// the fleet hand it to the engine as one).
var _ relay.Store = (*adoptstore.Store)(nil)
