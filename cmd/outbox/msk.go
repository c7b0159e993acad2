package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/twmb/franz-go/pkg/sasl"
	saslaws "github.com/twmb/franz-go/pkg/sasl/aws"

	"github.com/txoutbox/outbox/publisher/outboxkafka"
	"github.com/txoutbox/outbox/publisher/outboxurl"
)

// mskParamRegion is the kafka:// URL parameter of sasl=aws-msk-iam that
// names the AWS region of the credential chain.
const mskParamRegion = "region"

// mskIAM serves kafka://…?sasl=aws-msk-iam: Amazon MSK's IAM sign-in
// (franz-go's AWS_MSK_IAM mechanism), with credentials from the AWS SDK's
// default chain. It lives in the command, not in outboxurl, so that the
// root module does not depend on aws-sdk-go-v2.
var mskIAM = outboxurl.KafkaSASL{
	Name:      "aws-msk-iam",
	Params:    []string{mskParamRegion},
	Mechanism: openMSKIAM,
}

// openMSKIAM loads the AWS configuration the SDK's way
// (config.LoadDefaultConfig: environment, shared config and credentials
// files and profile, web identity (EKS IRSA), ECS task and EC2 instance
// roles), with u's region= when given, and returns the mechanism. The
// credentials are asked for at every authentication (the SDK caches them
// and refreshes them before they expire), so that temporary ones rotate
// under a long-running relay.
//
// The request is signed for the region in the broker's host name (every
// MSK endpoint has one); for a host name without one (a DNS alias),
// franz-go signs for AWS_REGION or AWS_DEFAULT_REGION.
func openMSKIAM(u *url.URL) (sasl.Mechanism, error) {
	var opts []func(*config.LoadOptions) error
	if r := u.Query().Get(mskParamRegion); r != "" {
		opts = append(opts, config.WithRegion(r))
	} else if u.Query().Has(mskParamRegion) {
		return nil, fmt.Errorf("%s is empty", mskParamRegion)
	}
	cfg, err := config.LoadDefaultConfig(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %v", err)
	}
	creds := cfg.Credentials
	if creds == nil {
		return nil, errors.New("the AWS configuration has no credential provider")
	}
	return saslaws.ManagedStreamingIAM(func(ctx context.Context) (saslaws.Auth, error) {
		c, err := creds.Retrieve(ctx)
		if err != nil {
			return saslaws.Auth{}, fmt.Errorf("aws-msk-iam: %w: %v", outboxkafka.ErrNoCredentials, err)
		}
		return saslaws.Auth{AccessKey: c.AccessKeyID, SecretKey: c.SecretAccessKey, SessionToken: c.SessionToken}, nil
	}), nil
}
