package cli

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/claimcheck"
)

// claimStores open the blob stores that modules of their own serve
// (s3://, gs://), by URL scheme; the command registers them
// (RegisterClaimStore), so that this package does not depend on their
// SDKs.
var claimStores sync.Map // scheme → func(context.Context, *url.URL) (claimcheck.Store, error)

// RegisterClaimStore makes --claim-check (OUTBOX_CLAIM_CHECK_DIR,
// claim_check) take scheme://… URLs, opened by open.
func RegisterClaimStore(scheme string, open func(context.Context, *url.URL) (claimcheck.Store, error)) {
	claimStores.Store(strings.ToLower(scheme), open)
}

// urlScheme matches a value that is a URL rather than a directory.
var urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// openClaimStore opens the store v names: a directory, or a URL of a
// registered scheme.
func openClaimStore(ctx context.Context, v string) (claimcheck.Store, error) {
	if !urlScheme.MatchString(v) {
		return claimcheck.OpenDir(v)
	}
	u, err := url.Parse(v)
	if err != nil {
		return nil, fmt.Errorf("%q is not a valid URL", v)
	}
	open, ok := claimStores.Load(strings.ToLower(u.Scheme))
	if !ok {
		return nil, fmt.Errorf("scheme %q is not a blob store this program serves (a directory, or s3://BUCKET[/PREFIX] or gs://BUCKET[/PREFIX] in the outbox command)", u.Scheme)
	}
	return open.(func(context.Context, *url.URL) (claimcheck.Store, error))(ctx, u)
}

// relayClaimCheck opens the relay's blob store (--claim-check, else
// OUTBOX_CLAIM_CHECK_DIR, else the config's claim_check: a directory, or
// s3://BUCKET[/PREFIX]?region=…, gs://BUCKET[/PREFIX]) into rc.ClaimCheck. A route that inlines
// claim-checked payloads by its own option (claim=inline) with no store,
// or a store that cannot be opened, is bad configuration.
func relayClaimCheck(r *resolver, flagVal string, rc *outbox.RelayConfig) error {
	dir := r.text("claim-check", flagVal, "OUTBOX_CLAIM_CHECK_DIR", r.cfg.ClaimCheck)
	if dir == "" {
		for _, rt := range rc.Routes {
			if rt.ClaimCheck == outbox.ClaimInline {
				return usagef("relay: route %s fetches claim-checked payloads (claim=inline) and the relay has no blob store: give --claim-check DIR (or s3://BUCKET/PREFIX, gs://BUCKET/PREFIX) or OUTBOX_CLAIM_CHECK_DIR", routeName(rt))
			}
		}
		return nil
	}
	st, err := openClaimStore(context.Background(), dir)
	if err != nil {
		return usagef("relay: --claim-check: %s", errorLine(err))
	}
	rc.ClaimCheck = st
	return nil
}
