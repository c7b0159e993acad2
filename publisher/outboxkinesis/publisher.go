package outboxkinesis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// Config defaults: the service's limits for a stream created with the
// default record size.
const (
	// DefaultMaxRecordBytes is the largest record (data and partition
	// key) of a stream with the default record size, 1 MiB.
	DefaultMaxRecordBytes = 1 << 20
	// DefaultMaxRequestBytes bounds one PutRecords call, partition keys
	// included: 5 MiB.
	DefaultMaxRequestBytes = 5 << 20
	// MaxRecordsPerCall is the most records one PutRecords call takes.
	MaxRecordsPerCall = 500
	// DefaultThrottleWait is how long a route is held after the service
	// throttled a record: shard limits are per second.
	DefaultThrottleWait = time.Second
	// MaxStreamNameLen is the longest stream name Kinesis takes.
	MaxStreamNameLen = 128
)

// ErrClosed is returned for every message published after Close.
var ErrClosed = errors.New("outboxkinesis: publisher is closed")

// Client is the part of *kinesis.Client a Publisher uses.
type Client interface {
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
}

// Config configures a Publisher. The zero value (or nil) is valid: every
// message goes to the stream its envelope's Destination names.
type Config struct {
	// Stream is the name of the stream every message goes to, whatever
	// its destination. Defaults to "": the envelope's Destination names
	// the stream (a stream name, or a stream ARN starting with "arn:").
	Stream string
	// StreamARN is the ARN of the stream every message goes to; set
	// Stream or StreamARN, not both. Defaults to "".
	StreamARN string
	// MaxRecordBytes is the largest record sent: data and partition key,
	// in bytes. A message whose record is larger goes dead with the
	// sizes in its reason. Raise it for a stream created with a larger
	// MaxRecordSizeInKiB (up to 10 MiB). Defaults to DefaultMaxRecordBytes
	// (1 MiB).
	MaxRecordBytes int
	// MaxRequestBytes bounds the records of one PutRecords call, partition
	// keys included; a batch is split into calls under it. It must be at
	// least MaxRecordBytes. Defaults to DefaultMaxRequestBytes (5 MiB), or
	// MaxRecordBytes when that is larger.
	MaxRequestBytes int
	// MaxRecordsPerCall bounds the records of one PutRecords call, 1 to
	// MaxRecordsPerCall. Defaults to MaxRecordsPerCall (500).
	MaxRecordsPerCall int
	// ThrottleWait is how long the relay holds the route after the
	// service throttled a record (ProvisionedThroughputExceededException).
	// Defaults to DefaultThrottleWait (1 s).
	ThrottleWait time.Duration
	// CloudEvents, when set, writes every record as a CloudEvent in the
	// JSON event format (structured mode: Kinesis has no binary binding)
	// instead of the outbox's JSON framing; see the package documentation.
	// Defaults to nil, the JSON framing.
	CloudEvents *outboxce.Format
}

// Publisher publishes envelopes to Kinesis Data Streams with PutRecords.
// It is safe for concurrent use.
type Publisher struct {
	client       Client
	stream       string // fixed stream name, or ""
	streamARN    string // fixed stream ARN, or ""
	maxRecord    int
	maxRequest   int
	maxRecords   int
	throttleWait time.Duration
	ce           *outboxce.Format
	closeIdle    func() // OpenURL's HTTP client: let its connections go
	closed       atomic.Bool
}

var (
	_ publisher.Publisher    = (*Publisher)(nil)
	_ publisher.RunPublisher = (*Publisher)(nil)
)

// New returns a Publisher over client, a *kinesis.Client the caller
// configured (region, credentials, retries).
func New(client Client, cfg *Config) (*Publisher, error) {
	if client == nil {
		return nil, errors.New("outboxkinesis: nil client")
	}
	if cfg == nil {
		cfg = &Config{}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Publisher{
		client:       client,
		stream:       cfg.Stream,
		streamARN:    cfg.StreamARN,
		maxRecord:    cfg.MaxRecordBytes,
		maxRequest:   cfg.MaxRequestBytes,
		maxRecords:   cfg.MaxRecordsPerCall,
		throttleWait: cfg.ThrottleWait,
		ce:           cfg.CloudEvents,
	}
	if p.maxRecord == 0 {
		p.maxRecord = DefaultMaxRecordBytes
	}
	if p.maxRequest == 0 {
		p.maxRequest = max(DefaultMaxRequestBytes, p.maxRecord)
	}
	if p.maxRecords == 0 {
		p.maxRecords = MaxRecordsPerCall
	}
	if p.throttleWait == 0 {
		p.throttleWait = DefaultThrottleWait
	}
	return p, nil
}

func (c *Config) validate() error {
	switch {
	case c.Stream != "" && c.StreamARN != "":
		return errors.New("outboxkinesis: set Config.Stream or Config.StreamARN, not both")
	case c.Stream != "":
		if err := validStreamName(c.Stream); err != nil {
			return fmt.Errorf("outboxkinesis: Config.Stream: %v", err)
		}
	case c.StreamARN != "":
		if err := validStreamARN(c.StreamARN); err != nil {
			return fmt.Errorf("outboxkinesis: Config.StreamARN: %v", err)
		}
	}
	if c.MaxRecordBytes < 0 || c.MaxRequestBytes < 0 || c.ThrottleWait < 0 {
		return errors.New("outboxkinesis: Config.MaxRecordBytes, MaxRequestBytes and ThrottleWait must not be negative")
	}
	if c.MaxRecordsPerCall < 0 || c.MaxRecordsPerCall > MaxRecordsPerCall {
		return fmt.Errorf("outboxkinesis: Config.MaxRecordsPerCall %d: want 1 to %d (0 for %d)", c.MaxRecordsPerCall, MaxRecordsPerCall, MaxRecordsPerCall)
	}
	if c.MaxRequestBytes > 0 && c.MaxRequestBytes < max(c.MaxRecordBytes, 1) {
		return fmt.Errorf("outboxkinesis: Config.MaxRequestBytes %d is less than MaxRecordBytes %d", c.MaxRequestBytes, c.MaxRecordBytes)
	}
	if c.MaxRequestBytes > 0 && c.MaxRecordBytes == 0 && c.MaxRequestBytes < DefaultMaxRecordBytes {
		return fmt.Errorf("outboxkinesis: Config.MaxRequestBytes %d is less than the default MaxRecordBytes %d", c.MaxRequestBytes, DefaultMaxRecordBytes)
	}
	if err := c.CloudEvents.Validate(); err != nil {
		return fmt.Errorf("outboxkinesis: Config.CloudEvents: %v", err)
	}
	return nil
}

// validStreamName says why s cannot be a Kinesis stream name.
func validStreamName(s string) error {
	if s == "" {
		return errors.New("empty stream name")
	}
	if len(s) > MaxStreamNameLen {
		return fmt.Errorf("stream name %.40q… is longer than %d characters", s, MaxStreamNameLen)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return fmt.Errorf("invalid stream name %q: Kinesis stream names are letters, digits, '_', '.' and '-'", s)
		}
	}
	return nil
}

// validStreamARN says why s cannot be a Kinesis stream ARN
// (arn:PARTITION:kinesis:REGION:ACCOUNT:stream/NAME).
func validStreamARN(s string) error {
	parts := strings.SplitN(s, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "kinesis" || !strings.HasPrefix(parts[5], "stream/") {
		return fmt.Errorf("invalid stream ARN %q: want arn:aws:kinesis:REGION:ACCOUNT:stream/NAME", s)
	}
	if err := validStreamName(strings.TrimPrefix(parts[5], "stream/")); err != nil {
		return fmt.Errorf("invalid stream ARN %q: %v", s, err)
	}
	return nil
}

// PublishesRuns reports true: Publish keeps a key's order within a call
// (see the package documentation, "Order").
func (p *Publisher) PublishesRuns() bool { return true }

// item is one envelope ready to go.
type item struct {
	i      int    // index in the batch
	group  string // the key whose order it keeps
	stream string // stream name or ARN
	entry  types.PutRecordsRequestEntry
	size   int // data and partition key bytes
}

// Publish sends the batch with PutRecords and returns one result per
// envelope: nil only for a record the service stored (it returned the
// record's sequence number). A key's messages go in rounds, one per
// call, so that a key's later message is never stored after an earlier
// one failed.
func (p *Publisher) Publish(ctx context.Context, batch []*publisher.Envelope) []error {
	errs := make([]error, len(batch))
	if p.closed.Load() {
		for i := range errs {
			errs[i] = ErrClosed
		}
		return errs
	}
	var rounds [][]*item
	seen := make(map[string]int, len(batch))
	for i, env := range batch {
		it, err := p.prepare(i, env)
		if err != nil {
			errs[i] = publisher.Permanent(err)
			continue
		}
		r := seen[it.group]
		seen[it.group] = r + 1
		if r == len(rounds) {
			rounds = append(rounds, nil)
		}
		rounds[r] = append(rounds[r], it)
	}
	failed := map[string]string{} // key → id of its message that failed
	for _, round := range rounds {
		todo := round[:0:0]
		for _, it := range round {
			if id, ok := failed[it.group]; ok {
				errs[it.i] = fmt.Errorf("outboxkinesis: stream %s: message %s not sent: message %s of the same key failed before it", it.stream, batch[it.i].ID, id)
				continue
			}
			todo = append(todo, it)
		}
		p.sendRound(ctx, todo, errs)
		for _, it := range todo {
			if e := errs[it.i]; e != nil && publisher.Classify(e) != publisher.ClassPermanent {
				failed[it.group] = batch[it.i].ID
			}
		}
	}
	return errs
}

// prepare builds the record of env, or says why it cannot be sent.
func (p *Publisher) prepare(i int, env *publisher.Envelope) (*item, error) {
	if env == nil {
		return nil, errors.New("outboxkinesis: nil envelope")
	}
	stream := p.stream
	if p.streamARN != "" {
		stream = p.streamARN
	}
	if stream == "" {
		stream = env.Destination
		var err error
		if strings.HasPrefix(stream, "arn:") {
			err = validStreamARN(stream)
		} else {
			err = validStreamName(stream)
		}
		if err != nil {
			return nil, fmt.Errorf("outboxkinesis: destination %q: %v", env.Destination, err)
		}
	}
	if env.ID == "" {
		return nil, fmt.Errorf("outboxkinesis: stream %s: message has no id", stream)
	}
	data, err := Data(env, p.ce)
	if err != nil {
		return nil, fmt.Errorf("outboxkinesis: stream %s: message %s: %v", stream, env.ID, err)
	}
	pk := PartitionKey(env.Key, env.ID)
	size := len(data) + len(pk)
	if size > p.maxRecord {
		return nil, fmt.Errorf("outboxkinesis: stream %s: message %s too large: the record is %d bytes (data %d, of which payload %d, partition key %d), the limit is %d bytes per record",
			stream, env.ID, size, len(data), len(env.Payload), len(pk), p.maxRecord)
	}
	group := env.Key
	if group == "" {
		group = "\x00" + env.ID // no key: a group of its own
	}
	return &item{i: i, group: group, stream: stream, size: size, entry: types.PutRecordsRequestEntry{Data: data, PartitionKey: aws.String(pk)}}, nil
}

// sendRound sends items (no two of one key) in PutRecords calls, one
// stream per call, each under the count and size limits.
func (p *Publisher) sendRound(ctx context.Context, items []*item, errs []error) {
	var streams []string
	byStream := map[string][]*item{}
	for _, it := range items {
		if _, ok := byStream[it.stream]; !ok {
			streams = append(streams, it.stream)
		}
		byStream[it.stream] = append(byStream[it.stream], it)
	}
	for _, s := range streams {
		var call []*item
		size := 0
		for _, it := range byStream[s] {
			if len(call) == p.maxRecords || size+it.size > p.maxRequest {
				p.put(ctx, s, call, errs)
				call, size = nil, 0
			}
			call = append(call, it)
			size += it.size
		}
		if len(call) > 0 {
			p.put(ctx, s, call, errs)
		}
	}
}

// put makes one PutRecords call and sets each record's result.
func (p *Publisher) put(ctx context.Context, stream string, call []*item, errs []error) {
	if err := ctx.Err(); err != nil {
		for _, it := range call {
			errs[it.i] = fmt.Errorf("outboxkinesis: stream %s: not sent: %v", stream, err)
		}
		return
	}
	in := &kinesis.PutRecordsInput{Records: make([]types.PutRecordsRequestEntry, len(call))}
	if strings.HasPrefix(stream, "arn:") {
		in.StreamARN = aws.String(stream)
	} else {
		in.StreamName = aws.String(stream)
	}
	for j, it := range call {
		in.Records[j] = it.entry
	}
	out, err := p.client.PutRecords(ctx, in)
	if err != nil {
		e := p.callError(stream, len(call), err)
		if publisher.Classify(e) == publisher.ClassPermanent && len(call) > 1 {
			// The service refused the call as invalid: find the record
			// it refuses by sending each alone, so that the others are
			// not condemned with it.
			for _, it := range call {
				p.put(ctx, stream, []*item{it}, errs)
			}
			return
		}
		for _, it := range call {
			errs[it.i] = e
		}
		return
	}
	if len(out.Records) != len(call) {
		e := publisher.Unknown(fmt.Errorf("outboxkinesis: stream %s: PutRecords answered %d results for %d records", stream, len(out.Records), len(call)))
		for _, it := range call {
			errs[it.i] = e
		}
		return
	}
	for j, r := range out.Records {
		it := call[j]
		switch {
		case aws.ToString(r.ErrorCode) != "":
			errs[it.i] = p.recordError(stream, aws.ToString(r.ErrorCode), aws.ToString(r.ErrorMessage))
		case aws.ToString(r.SequenceNumber) == "":
			errs[it.i] = publisher.Unknown(fmt.Errorf("outboxkinesis: stream %s: PutRecords answered neither a sequence number nor an error for record %d of %d", stream, j+1, len(call)))
		default:
			errs[it.i] = nil
		}
	}
}

// Close makes later Publish calls fail. A client given to New is the
// caller's and stays as it is; OpenURL's client closes its idle
// connections.
func (p *Publisher) Close() error {
	if !p.closed.Swap(true) && p.closeIdle != nil {
		p.closeIdle()
	}
	return nil
}
