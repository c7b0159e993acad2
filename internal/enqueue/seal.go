package enqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/txoutbox/outbox/internal/msgcheck"
	"github.com/txoutbox/outbox/internal/relay"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/seal"
)

// Seal is outbox.SealConfig, field for field; that type documents them.
type Seal struct {
	Keys      seal.KeyProvider
	Algorithm seal.Algorithm
	Topics    []string
	Headers   []string
}

// Validate reports the first field of c that is out of range.
func (c *Seal) Validate() error {
	if c.Keys == nil {
		return errors.New("outbox: Config.Seal.Keys is required")
	}
	if c.Algorithm != "" && !c.Algorithm.Valid() {
		return fmt.Errorf("outbox: Config.Seal.Algorithm %q: want %s or %s", c.Algorithm, seal.AES256GCM, seal.XChaCha20Poly1305)
	}
	for i, p := range c.Topics {
		if err := relay.ValidatePattern(p); err != nil {
			return fmt.Errorf("outbox: Config.Seal.Topics[%d]: %w", i, err)
		}
	}
	for i, h := range c.Headers {
		lh := strings.ToLower(h)
		if !msgcheck.HeaderName(lh) || msgcheck.Reserved(lh) || lh == publisher.HeaderContentType || lh == publisher.HeaderTransferEncode ||
			lh == publisher.HeaderTraceParent || lh == publisher.HeaderTraceState {
			return fmt.Errorf("outbox: Config.Seal.Headers[%d] %q cannot be sealed", i, h)
		}
	}
	return nil
}

// Seals reports whether m is sealed; never for a nil c.
func (c *Seal) Seals(m *Message) bool {
	return c != nil && c.seals(m.Topic, m.SealSubject)
}

// seals reports whether a message of topic is sealed.
func (c *Seal) seals(topic, subject string) bool {
	if subject != "" || len(c.Topics) == 0 {
		return true
	}
	for _, p := range c.Topics {
		if relay.MatchTopic(p, topic) {
			return true
		}
	}
	return false
}

// Row replaces row's payload by m's payload sealed, and records the
// algorithm and key in its headers, when the message is to be sealed
// (Seals). A payload stored base64 is sealed as the bytes it stands for:
// the sealed text carries any payload. i is the message's index in the
// call, limit the payload limit it is held to.
func (c *Seal) Row(ctx context.Context, i int, row *store.NewMessage, m *Message, limit int) error {
	if c == nil {
		if m.SealSubject != "" {
			return &Invalid{Index: i, Field: "SealSubject", Kind: InvalidMessage, Detail: "the producer has no Config.Seal"}
		}
		return nil
	}
	if !c.seals(m.Topic, m.SealSubject) {
		return nil
	}
	if len(m.Payload) > limit-seal.Overhead {
		return &Invalid{Index: i, Field: "Payload", Kind: PayloadTooLarge,
			Detail: strconv.Itoa(len(m.Payload)) + " bytes, limit " + strconv.Itoa(limit-seal.Overhead) + " when sealed"}
	}
	var (
		key seal.Key
		err error
	)
	switch {
	case m.SealSubject == "":
		key, err = c.Keys.Current(ctx)
	default:
		if !seal.ValidKeyID(m.SealSubject) {
			return &Invalid{Index: i, Field: "SealSubject", Kind: InvalidMessage, Detail: "1-255 printable ASCII characters without spaces"}
		}
		sk, ok := c.Keys.(seal.SubjectKeyProvider)
		if !ok {
			return &Invalid{Index: i, Field: "SealSubject", Kind: InvalidMessage, Detail: "Config.Seal.Keys keeps no keys per subject (seal.SubjectKeyProvider)"}
		}
		key, err = sk.SubjectKey(ctx, m.SealSubject)
	}
	if err != nil {
		return fmt.Errorf("outbox: seal: %w", err)
	}
	alg := c.Algorithm
	if alg == "" {
		alg = seal.AES256GCM
	}
	text, err := seal.Seal(alg, key, row.MessageID, m.Payload)
	if err != nil {
		return fmt.Errorf("outbox: seal: %w", err)
	}
	headers := map[string]string{}
	if err := json.Unmarshal([]byte(row.Headers), &headers); err != nil {
		return fmt.Errorf("outbox: seal: %w", err)
	}
	delete(headers, publisher.HeaderTransferEncode)
	var hidden map[string]string
	for _, h := range c.Headers {
		lh := strings.ToLower(h)
		if v, ok := headers[lh]; ok {
			if hidden == nil {
				hidden = map[string]string{}
			}
			hidden[lh] = v
			delete(headers, lh)
		}
	}
	if hidden != nil {
		sh, err := seal.SealHeaders(alg, key, row.MessageID, hidden)
		if err != nil {
			return fmt.Errorf("outbox: seal: %w", err)
		}
		headers[seal.HeaderSealedHeaders] = sh
	}
	headers[seal.HeaderAlgorithm] = string(alg)
	headers[seal.HeaderKeyID] = key.ID
	hb, err := json.Marshal(headers)
	if err != nil {
		return fmt.Errorf("outbox: seal: %w", err)
	}
	row.Payload, row.Headers = text, string(hb)
	return nil
}
