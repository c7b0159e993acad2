package adoptstore

import (
	"github.com/txoutbox/outbox/internal/relay"
	"github.com/txoutbox/outbox/internal/store"
)

// NewRelay is relay.New over b: a driver over an adopted table
// (store.TableSource) makes the relay read that table, and its reads
// leave out payloads the relay would refuse as too large, as the relay's
// own store does.
func NewRelay(b *store.Backend, c relay.Config) (*relay.Relay, error) {
	a, err := Of(b, c.MaxPayloadBytes)
	if err != nil {
		return nil, err
	}
	if a != nil {
		c.Store = a
	}
	return relay.New(b, c)
}
