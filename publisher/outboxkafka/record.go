package outboxkafka

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// maxTopicLen is the longest topic name Kafka accepts.
const maxTopicLen = 249

// newRecord renders an envelope as a record (see the package doc). Its
// errors are permanent: the message cannot become a record.
func newRecord(env *publisher.Envelope, ce *outboxce.Format) (*kgo.Record, error) {
	if env == nil {
		return nil, errors.New("kafka: nil envelope")
	}
	if err := ValidTopic(env.Destination); err != nil {
		return nil, fmt.Errorf("kafka: destination %q: %w", env.Destination, err)
	}
	rec := &kgo.Record{Topic: env.Destination, Value: env.Payload}
	if rec.Value == nil {
		rec.Value = []byte{} // null is a tombstone on compacted topics
	}
	if env.Key != "" {
		rec.Key = []byte(env.Key)
	}
	headers := env.Headers
	if ce != nil {
		h, err := ce.Headers(outboxce.Kafka, env)
		if err != nil {
			return nil, err
		}
		headers = h
	}
	names := make([]string, 0, len(headers))
	for k := range headers {
		if k != HeaderMessageID {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	rec.Headers = make([]kgo.RecordHeader, 0, len(names)+1)
	if ce == nil {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: HeaderMessageID, Value: []byte(env.ID)})
	}
	for _, k := range names {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(headers[k])})
	}
	return rec, nil
}

// ValidTopic reports why name is not a legal Kafka topic name: 1 to 249
// characters among ASCII letters, digits, '.', '_' and '-', and neither
// "." nor "..". Outbox topics may contain ':', which Kafka refuses; route
// such topics to a Destination Kafka accepts.
func ValidTopic(name string) error {
	switch {
	case name == "":
		return errors.New("empty topic name")
	case len(name) > maxTopicLen:
		return fmt.Errorf("topic name longer than %d characters", maxTopicLen)
	case name == "." || name == "..":
		return errors.New(`"." and ".." are not topic names`)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("character %q is not allowed in a Kafka topic name (letters, digits, '.', '_', '-')", c)
		}
	}
	return nil
}
