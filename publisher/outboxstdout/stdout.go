// Package outboxstdout is the stdout:// destination: it writes every
// message as one JSON line, for demos, debugging and piping the relay into
// other tools.
//
// Each line is an object with the fields message_id, topic, destination,
// business_key (omitted when empty), headers, payload and attempt. The
// payload is embedded as JSON when the content type is JSON and the payload
// is valid JSON, and as a string otherwise; a payload that is not UTF-8 is
// written base64-encoded with "payload_encoding":"base64" beside it.
package outboxstdout

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/txoutbox/outbox/publisher"
)

// Publisher writes messages as JSON lines to an io.Writer. It is safe for
// concurrent use: lines from concurrent batches never interleave.
type Publisher struct {
	mu sync.Mutex
	w  io.Writer
}

var _ publisher.Publisher = (*Publisher)(nil)

// New returns a Publisher writing to w. A w with a Flush() error method
// (such as *bufio.Writer) is flushed after every batch, so a nil result
// means the line reached the underlying writer.
func New(w io.Writer) *Publisher {
	return &Publisher{w: w}
}

// line is the shape of one output line. Field order is the output order.
type line struct {
	MessageID       string            `json:"message_id"`
	Topic           string            `json:"topic"`
	Destination     string            `json:"destination"`
	BusinessKey     string            `json:"business_key,omitempty"`
	Headers         map[string]string `json:"headers"`
	Payload         any               `json:"payload"`
	PayloadEncoding string            `json:"payload_encoding,omitempty"`
	Attempt         int               `json:"attempt"`
}

// Publish writes one line per envelope, in batch order. A failed write is
// the error of that envelope; once ctx is done the remaining envelopes are
// not written and get ctx's error.
func (p *Publisher) Publish(ctx context.Context, batch []*publisher.Envelope) []error {
	errs := make([]error, len(batch))
	var buf bytes.Buffer
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, env := range batch {
		if err := ctx.Err(); err != nil {
			errs[i] = fmt.Errorf("stdout: not written: %w", err)
			continue
		}
		if env == nil {
			errs[i] = publisher.Permanent(errors.New("stdout: nil envelope"))
			continue
		}
		buf.Reset()
		if err := encode(&buf, env); err != nil {
			errs[i] = publisher.Permanent(fmt.Errorf("stdout: encode message %s: %w", env.ID, err))
			continue
		}
		if _, err := p.w.Write(buf.Bytes()); err != nil {
			errs[i] = fmt.Errorf("stdout: write: %w", err)
		}
	}
	if f, ok := p.w.(interface{ Flush() error }); ok {
		if err := f.Flush(); err != nil {
			for i := range errs {
				if errs[i] == nil {
					errs[i] = fmt.Errorf("stdout: flush: %w", err)
				}
			}
		}
	}
	return errs
}

// Close does nothing: the writer belongs to the caller.
func (p *Publisher) Close() error { return nil }

// encode appends env's JSON line, newline included, to buf.
func encode(buf *bytes.Buffer, env *publisher.Envelope) error {
	l := line{
		MessageID:   env.ID,
		Topic:       env.Topic,
		Destination: env.Destination,
		BusinessKey: env.Key,
		Headers:     env.Headers,
		Attempt:     env.Attempt,
	}
	if l.Headers == nil {
		l.Headers = map[string]string{}
	}
	switch {
	case isJSON(env.Headers[publisher.HeaderContentType]) && json.Valid(env.Payload):
		l.Payload = json.RawMessage(env.Payload)
	case utf8.Valid(env.Payload):
		l.Payload = string(env.Payload)
	default:
		l.Payload = base64.StdEncoding.EncodeToString(env.Payload)
		l.PayloadEncoding = "base64"
	}
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	return enc.Encode(l) // compacts raw JSON, so the line stays one line
}

// isJSON reports whether ct is a JSON media type; an empty content type is
// the outbox default, JSON.
func isJSON(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}
