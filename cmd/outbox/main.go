// Command outbox runs the transactional outbox from the shell: it migrates
// the schema, runs the relay, enqueues messages and inspects and repairs
// the outbox table. Run 'outbox help' for the commands.
package main

import (
	"context"
	"net/url"
	"os"

	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/claimcheck/outboxs3"
	"github.com/txoutbox/outbox/cmd/outbox/internal/cli"
	"github.com/txoutbox/outbox/publisher/outboxkinesis"
	"github.com/txoutbox/outbox/publisher/outboxpubsub"
	"github.com/txoutbox/outbox/publisher/outboxsns"
	"github.com/txoutbox/outbox/publisher/outboxsqs"
	"github.com/txoutbox/outbox/publisher/outboxurl"
)

func main() {
	// The cloud destinations' publishers are modules of their own, which
	// the command brings in: --to, --route, bench and the configuration
	// file open them through outboxurl.
	outboxurl.Register(outboxurl.Scheme{Names: []string{"sqs"}, Open: outboxsqs.OpenURL})
	outboxurl.Register(outboxurl.Scheme{Names: []string{"sns"}, Open: outboxsns.OpenURL})
	outboxurl.Register(outboxurl.Scheme{Names: []string{"kinesis"}, Open: outboxkinesis.OpenURL})
	outboxurl.Register(outboxurl.Scheme{Names: []string{"pubsub"}, Open: outboxpubsub.OpenURL})
	// The S3 blob store of the claim check (--claim-check s3://…).
	cli.RegisterClaimStore(outboxs3.Scheme, func(ctx context.Context, u *url.URL) (claimcheck.Store, error) {
		st, err := outboxs3.OpenURL(ctx, u)
		if err != nil {
			return nil, err
		}
		return st, nil
	})
	outboxurl.RegisterKafkaSASL(mskIAM) // kafka://…?sasl=aws-msk-iam, msk.go
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
