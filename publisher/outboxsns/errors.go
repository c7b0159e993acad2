package outboxsns

import (
	"context"
	"errors"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/txoutbox/outbox/publisher/internal/awswire"
)

// DefaultThrottleWait is how long the route is held after the service
// throttled a call; AWS answers give no wait of their own.
const DefaultThrottleWait = time.Second

// codeKinds are the SNS error codes, besides those every AWS service may
// answer (awswire.KindOf), that say something about the route.
var codeKinds = map[string]awswire.Kind{
	"Throttled":          awswire.KindThrottled,
	"KMSThrottling":      awswire.KindThrottled,
	"NotFound":           awswire.KindUnavailable,
	"AuthorizationError": awswire.KindUnavailable,
	"KMSAccessDenied":    awswire.KindUnavailable,
	"KMSDisabled":        awswire.KindUnavailable,
	"KMSInvalidState":    awswire.KindUnavailable,
	"KMSNotFound":        awswire.KindUnavailable,
	"KMSOptInRequired":   awswire.KindUnavailable,
}

// kindOf is what an SNS error code means for the route (KindOther when
// it says nothing about it).
func kindOf(code string) awswire.Kind { return awswire.KindOf(code, codeKinds) }

// missingTopic reports whether err says the topic does not exist.
func missingTopic(err error) bool {
	var nf *types.NotFoundException
	return errors.As(err, &nf)
}

// callError classifies the error of a whole PublishBatch; sent says
// whether the request reached the transport.
func (p *Publisher) callError(ctx context.Context, what string, err error, sent bool) (awswire.Failure, error) {
	f := awswire.Fault{Sent: sent, SendFailed: errors.As(err, new(*smithyhttp.RequestSendError))}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		var re *awshttp.ResponseError
		f.Answered, f.Kind = true, kindOf(ae.ErrorCode())
		if missingTopic(err) {
			f.Kind = awswire.KindUnavailable
		}
		f.ServerFault = (errors.As(err, &re) && re.HTTPStatusCode() >= 500) || ae.ErrorFault() == smithy.FaultServer
	}
	return p.batch.CallError(ctx, what, err, f)
}
