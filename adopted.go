package outbox

import (
	"github.com/txoutbox/outbox/internal/relay"
	"github.com/txoutbox/outbox/internal/store"
)

func init() {
	relay.WrapStore = func(cfg any, wrap func(*store.Store) relay.Store) {
		cfg.(*RelayConfig).wrapStore = wrap
	}
}
