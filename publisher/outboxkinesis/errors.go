package outboxkinesis

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/txoutbox/outbox/publisher"
)

// Per-record error codes of a PutRecords answer.
const (
	// CodeThroughputExceeded: the record's shard is over its write
	// limits (1 MiB or 1,000 records per second).
	CodeThroughputExceeded = "ProvisionedThroughputExceededException"
	// CodeInternalFailure: the service failed to store the record.
	CodeInternalFailure = "InternalFailure"
)

// Error codes of the AWS request layer that have no type in the Kinesis
// client: the request's credentials or signature were refused.
var authCodes = map[string]bool{
	"UnrecognizedClientException": true,
	"InvalidSignatureException":   true,
	"IncompleteSignature":         true,
	"MissingAuthenticationToken":  true,
	"ExpiredTokenException":       true,
	"InvalidClientTokenId":        true,
	"AccessDenied":                true,
}

// Throttling codes of the AWS request layer without a Kinesis type.
var throttleCodes = map[string]bool{
	"ThrottlingException":      true,
	"Throttling":               true,
	"RequestLimitExceeded":     true,
	"TooManyRequestsException": true,
}

func is[T error](err error) bool {
	var t T
	return errors.As(err, &t)
}

// recordError classifies the ErrorCode of one record of a PutRecords
// answer: the service did not store that record.
func (p *Publisher) recordError(stream, code, msg string) error {
	err := fmt.Errorf("outboxkinesis: stream %s: record not stored: %s: %s", stream, code, oneLine(msg))
	switch code {
	case CodeThroughputExceeded:
		return publisher.RetryAfter(err, p.throttleWait)
	case "KMSThrottlingException":
		return publisher.RetryAfter(err, p.throttleWait)
	case "KMSDisabledException", "KMSInvalidStateException", "KMSAccessDeniedException", "KMSNotFoundException", "KMSOptInRequired":
		return publisher.Unavailable(err)
	}
	// InternalFailure and codes the service may add: try again.
	return err
}

// callError classifies the failure of a whole PutRecords call of n
// records.
func (p *Publisher) callError(stream string, n int, err error) error {
	what := fmt.Sprintf("outboxkinesis: stream %s: PutRecords of %d records", stream, n)
	e := fmt.Errorf("%s: %s", what, oneLine(err.Error()))
	switch {
	case is[*types.ResourceNotFoundException](err):
		return publisher.Unavailable(fmt.Errorf("%s: the stream does not exist (or is not ACTIVE/UPDATING): %s", what, apiMessage(err)))
	case is[*types.AccessDeniedException](err), is[*types.ResourceInUseException](err),
		is[*types.KMSAccessDeniedException](err), is[*types.KMSDisabledException](err), is[*types.KMSInvalidStateException](err),
		is[*types.KMSNotFoundException](err), is[*types.KMSOptInRequired](err):
		return publisher.Unavailable(e)
	case is[*types.ProvisionedThroughputExceededException](err), is[*types.LimitExceededException](err),
		is[*types.ThrottlingException](err), is[*types.KMSThrottlingException](err):
		return publisher.RetryAfter(e, p.throttleWait)
	case is[*types.InvalidArgumentException](err), is[*types.ValidationException](err):
		return publisher.Permanent(e)
	case is[*types.InternalFailureException](err):
		return e
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch code := api.ErrorCode(); {
		case authCodes[code]:
			return publisher.Unavailable(e)
		case throttleCodes[code]:
			return publisher.RetryAfter(e, p.throttleWait)
		}
		var re *awshttp.ResponseError
		if errors.As(err, &re) {
			switch s := re.HTTPStatusCode(); {
			case s == 401 || s == 403:
				return publisher.Unavailable(e)
			case s == 429:
				return publisher.RetryAfter(e, p.throttleWait)
			}
		}
		// The service answered with an error: nothing was stored.
		return e
	}
	var timeout interface{ Timeout() bool }
	switch {
	case is[*smithyhttp.RequestSendError](err) && notConnected(err):
		return publisher.Unavailable(e)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &timeout) && timeout.Timeout()):
		// The request may have left before the end.
		return publisher.Unknown(e)
	case is[*smithy.DeserializationError](err):
		// An answer came but could not be read: the records may be stored.
		return publisher.Unknown(e)
	case is[*smithyhttp.RequestSendError](err):
		// The connection failed after the request may have left.
		return publisher.Unknown(e)
	}
	// The request never reached the transport: no credentials, an
	// endpoint that cannot be resolved, a request that cannot be signed.
	return publisher.Unavailable(e)
}

// notConnected reports whether a transport failure happened before the
// request was written: no connection (refused, no route, no such host)
// or a TLS handshake that failed.
func notConnected(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return is[*net.DNSError](err) || is[*tls.CertificateVerificationError](err) || is[x509.UnknownAuthorityError](err) ||
		is[x509.HostnameError](err) || is[tls.RecordHeaderError](err)
}

// apiMessage is the service's message in err, or err itself.
func apiMessage(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode() + ": " + oneLine(api.ErrorMessage())
	}
	return oneLine(err.Error())
}

// oneLine keeps a message on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
