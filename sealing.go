package outbox

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

// SealConfig makes a Producer seal payloads before they are written
// (package seal): the outbox table, its replicas and backups hold them
// encrypted, bound to their message id, with the algorithm and key id in
// the row's headers (seal.HeaderAlgorithm, seal.HeaderKeyID). Each route
// of the relay then opens them or passes them on sealed (Route.Sealed).
type SealConfig struct {
	// Keys provides the current key, and each data subject's key for
	// messages that name a SealSubject (a seal.SubjectKeyProvider then).
	// Required.
	Keys seal.KeyProvider
	// Algorithm seals the payloads. Defaults to seal.AES256GCM.
	Algorithm seal.Algorithm
	// Topics are route patterns (see Route) of the topics whose payloads
	// are sealed; a message naming a SealSubject is sealed whatever its
	// topic. Defaults to none: every topic.
	Topics []string
	// Headers names message headers sealed with the payload (e.g.
	// "x-customer-email"): a sealed message stores them in
	// seal.HeaderSealedHeaders instead, and they come back as headers
	// where the payload is opened. content-type and the trace headers
	// stay plain. Defaults to none.
	Headers []string
}

func (c *SealConfig) validate() error {
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

// sealsMessage reports whether the producer seals m.
func (p *Producer[TTx]) sealsMessage(m *Message) bool {
	return p.cfg.Seal != nil && p.cfg.Seal.seals(m.Topic, m.SealSubject)
}

// seals reports whether a message of topic is sealed.
func (c *SealConfig) seals(topic, subject string) bool {
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

// sealRow replaces row's payload by m's payload sealed, and records the
// algorithm and key in its headers, when the message is to be sealed
// (sealsMessage). A payload stored base64 is sealed as the bytes it
// stands for: the sealed text carries any payload. limit is the payload
// limit the message is held to.
func (p *Producer[TTx]) sealRow(ctx context.Context, i int, row *store.NewMessage, m *Message, limit int) error {
	c := p.cfg.Seal
	if c == nil {
		if m.SealSubject != "" {
			return &ValidationError{Index: i, Field: "SealSubject", Err: ErrInvalidMessage, Detail: "the producer has no Config.Seal"}
		}
		return nil
	}
	if !c.seals(m.Topic, m.SealSubject) {
		return nil
	}
	if len(m.Payload) > limit-seal.Overhead {
		return &ValidationError{Index: i, Field: "Payload", Err: ErrPayloadTooLarge,
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
			return &ValidationError{Index: i, Field: "SealSubject", Err: ErrInvalidMessage, Detail: "1-255 printable ASCII characters without spaces"}
		}
		sk, ok := c.Keys.(seal.SubjectKeyProvider)
		if !ok {
			return &ValidationError{Index: i, Field: "SealSubject", Err: ErrInvalidMessage, Detail: "Config.Seal.Keys keeps no keys per subject (seal.SubjectKeyProvider)"}
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
