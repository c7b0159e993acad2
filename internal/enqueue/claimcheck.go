package enqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/txoutbox/outbox/claimcheck"
	"github.com/txoutbox/outbox/internal/relay"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/publisher"
)

// ClaimCheck is outbox.ClaimCheckConfig, field for field; that type
// documents them.
type ClaimCheck struct {
	Store           claimcheck.Store
	Threshold       int
	Topics          []string
	MaxPayloadBytes int
}

// Validate reports the first field of c that is out of range.
func (c *ClaimCheck) Validate() error {
	switch {
	case c.Store == nil:
		return errors.New("outbox: Config.ClaimCheck.Store is required")
	case c.Threshold < 0:
		return errors.New("outbox: Config.ClaimCheck.Threshold must not be negative")
	case c.MaxPayloadBytes < 0:
		return errors.New("outbox: Config.ClaimCheck.MaxPayloadBytes must not be negative")
	}
	for i, p := range c.Topics {
		if err := relay.ValidatePattern(p); err != nil {
			return fmt.Errorf("outbox: Config.ClaimCheck.Topics[%d]: %w", i, err)
		}
	}
	return nil
}

// WithDefaults is a copy of c with threshold for a zero Threshold and
// maxPayload for a zero MaxPayloadBytes, and Topics of its own; nil for
// nil.
func (c *ClaimCheck) WithDefaults(threshold, maxPayload int) *ClaimCheck {
	if c == nil {
		return nil
	}
	cc := *c
	if cc.Threshold == 0 {
		cc.Threshold = threshold
	}
	if cc.MaxPayloadBytes == 0 {
		cc.MaxPayloadBytes = maxPayload
	}
	cc.Topics = append([]string(nil), c.Topics...)
	return &cc
}

// Claims reports whether m's payload goes to the store; never for a nil c.
func (c *ClaimCheck) Claims(m *Message) bool {
	if c == nil || len(m.Payload) <= c.Threshold {
		return false
	}
	if len(c.Topics) == 0 {
		return true
	}
	for _, p := range c.Topics {
		if relay.MatchTopic(p, m.Topic) {
			return true
		}
	}
	return false
}

// Blob is a payload to write to the claim-check store before the rows
// are inserted.
type Blob struct {
	key  string
	data []byte
}

// Claim takes row's payload out into a blob and puts the reference in its
// headers. sealed says row.Payload is the sealed text (which the blob
// then holds); otherwise the blob is m's payload as given, binary
// included.
func (c *ClaimCheck) Claim(row *store.NewMessage, m *Message, sealed bool) (Blob, error) {
	data := m.Payload
	if sealed {
		data = []byte(row.Payload)
	}
	ref := claimcheck.NewRef(c.Store.Scheme(), row.MessageID, data)
	headers := map[string]string{}
	if err := json.Unmarshal([]byte(row.Headers), &headers); err != nil {
		return Blob{}, fmt.Errorf("outbox: claim check: %w", err)
	}
	delete(headers, publisher.HeaderTransferEncode)
	ref.SetHeaders(headers)
	hb, err := json.Marshal(headers)
	if err != nil {
		return Blob{}, fmt.Errorf("outbox: claim check: %w", err)
	}
	row.Payload, row.Headers = "", string(hb)
	return Blob{key: ref.Key, data: data}, nil
}

// Put writes the blobs of a call to the store, before its rows.
func (c *ClaimCheck) Put(ctx context.Context, blobs []Blob) error {
	for _, b := range blobs {
		if err := c.Store.Put(ctx, b.key, b.data); err != nil {
			return fmt.Errorf("outbox: claim check: %w", err)
		}
	}
	return nil
}
