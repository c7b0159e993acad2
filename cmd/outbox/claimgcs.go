package main

import (
	"context"
	"net/url"

	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/claimcheck/outboxgcs"
	"github.com/txoutbox/outbox/cmd/outbox/internal/cli"
)

// The Google Cloud Storage blob store of the claim check (--claim-check
// gs://BUCKET[/PREFIX][?endpoint=URL]), with Application Default
// Credentials. It lives in the command, not in its internal/cli, so that the
// root module does not depend on the Cloud Storage client.
func init() {
	cli.RegisterClaimStore(outboxgcs.Scheme, func(ctx context.Context, u *url.URL) (claimcheck.Store, error) {
		st, err := outboxgcs.OpenURL(ctx, u)
		if err != nil {
			return nil, err
		}
		return st, nil
	})
}
