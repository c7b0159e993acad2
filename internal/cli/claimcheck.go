package cli

import (
	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/claimcheck"
)

// relayClaimCheck opens the relay's blob directory (--claim-check, else
// OUTBOX_CLAIM_CHECK_DIR, else the config's claim_check) into
// rc.ClaimCheck. A route that inlines claim-checked payloads by its own
// option (claim=inline) with no directory, or a directory that cannot be
// opened, is bad configuration.
func relayClaimCheck(r *resolver, flagVal string, rc *outbox.RelayConfig) error {
	dir := r.text("claim-check", flagVal, "OUTBOX_CLAIM_CHECK_DIR", r.cfg.ClaimCheck)
	if dir == "" {
		for _, rt := range rc.Routes {
			if rt.ClaimCheck == outbox.ClaimInline {
				name := rt.Name
				if name == "" {
					name = rt.Pattern
				}
				return usagef("relay: route %s fetches claim-checked payloads (claim=inline) and the relay has no blob store: give --claim-check DIR or OUTBOX_CLAIM_CHECK_DIR", name)
			}
		}
		return nil
	}
	d, err := claimcheck.OpenDir(dir)
	if err != nil {
		return usagef("relay: --claim-check: %s", errorLine(err))
	}
	rc.ClaimCheck = d
	return nil
}
