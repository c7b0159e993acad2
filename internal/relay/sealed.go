package relay

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/txoutbox/outbox/internal/redact"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/seal"
)

// Route modes of a sealed payload (Route.Sealed).
const (
	// SealedOpen: the relay opens a sealed payload and publishes it
	// plain. The default.
	SealedOpen = "open"
	// SealedPass: the relay publishes a sealed payload as stored, with
	// its algorithm and key id headers, for consumers to open.
	SealedPass = "pass"
)

// ErasedPrefix starts the last_error of a message whose key was erased.
const ErasedPrefix = "erased: "

// keyRetryDelay is how long a message waits, uncharged, when the key
// provider could not answer.
const keyRetryDelay = 5 * time.Second

// sealInfo is what a sealed row's headers say of it.
type sealInfo struct {
	alg, keyID string
	// headers is the value of seal.HeaderSealedHeaders, "" when none.
	headers string
}

// sealHeaders takes a row's seal headers out of headers, and says
// whether the row is sealed at all.
func sealHeaders(headers map[string]string) (sealInfo, bool) {
	alg, sealed := headers[seal.HeaderAlgorithm]
	if !sealed {
		return sealInfo{}, false
	}
	si := sealInfo{alg: alg, keyID: headers[seal.HeaderKeyID], headers: headers[seal.HeaderSealedHeaders]}
	delete(headers, seal.HeaderAlgorithm)
	delete(headers, seal.HeaderKeyID)
	delete(headers, seal.HeaderSealedHeaders)
	return si, true
}

// restore puts a sealed row's seal headers back, for a route that
// passes it on.
func (si sealInfo) restore(headers map[string]string) {
	headers[seal.HeaderAlgorithm], headers[seal.HeaderKeyID] = si.alg, si.keyID
	if si.headers != "" {
		headers[seal.HeaderSealedHeaders] = si.headers
	}
}

// unseal is the payload to publish of a sealed row on its route: opened
// (SealedOpen) or as stored with its seal headers put back (SealedPass).
// A row that cannot go returns its outcome instead: dead "cannot open
// sealed payload: …"; dead uncharged "erased: …" when its key was
// erased; pending uncharged when the key provider could not answer.
func (r *Relay) unseal(it *item, headers map[string]string, si sealInfo) ([]byte, *store.Outcome) {
	alg, keyID := si.alg, si.keyID
	row := it.row
	dead := func(msg string, charge bool) *store.Outcome {
		return &store.Outcome{ID: row.ID, Status: store.StatusDead, Error: msg, CountAttempt: charge}
	}
	const cannot = "cannot open sealed payload: "
	switch {
	case !seal.Algorithm(alg).Valid():
		return nil, dead(cannot+"unknown algorithm "+quoteShort(alg), true)
	case keyID == "":
		return nil, dead(cannot+"no "+seal.HeaderKeyID+" header", true)
	case !seal.ValidKeyID(keyID):
		return nil, dead(cannot+"invalid key id "+quoteShort(keyID), true)
	}
	mode := it.route.Sealed
	keys := r.cfg.Keys
	if keys == nil {
		if mode == SealedPass {
			si.restore(headers)
			return []byte(row.Payload), nil
		}
		return nil, dead(cannot+"the relay has no keys (outbox relay --keys FILE)", true)
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.PublishTimeout)
	defer cancel()
	key, err := keys.Key(ctx, keyID)
	switch {
	case errors.Is(err, seal.ErrErased):
		return nil, dead(ErasedPrefix+"key "+keyID+" no longer exists", false)
	case errors.Is(err, seal.ErrUnknownKey) && mode != SealedPass:
		return nil, dead(cannot+"unknown key "+keyID, true)
	case err != nil && mode != SealedPass:
		return nil, &store.Outcome{ID: row.ID, Status: store.StatusPending, Delay: keyRetryDelay,
			Error: "not counted (the key provider could not answer): " + redact.Text(oneLine(err.Error()))}
	}
	if mode == SealedPass {
		si.restore(headers)
		return []byte(row.Payload), nil
	}
	plain, err := seal.Open(seal.Algorithm(alg), key, row.MessageID, []byte(row.Payload))
	if err != nil {
		return nil, dead(cannot+oneLine(err.Error()), true)
	}
	if si.headers != "" {
		h, err := seal.OpenHeaders(seal.Algorithm(alg), key, row.MessageID, si.headers)
		if err != nil {
			return nil, dead("cannot open sealed headers: "+oneLine(err.Error()), true)
		}
		if why := headerError(h); why != "" {
			return nil, dead("sealed headers: "+why, true)
		}
		for k, v := range h {
			if !utf8.ValidString(v) {
				return nil, dead("sealed headers: the value of "+quoteShort(k)+" is not UTF-8", true)
			}
			headers[strings.ToLower(k)] = v
		}
	}
	return plain, nil
}

// quoteShort quotes an untrusted header value for a last_error.
func quoteShort(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	b := []byte{'"'}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < ' ' || c >= 0x7f || c == '"' || c == '\\' {
			c = '?'
		}
		b = append(b, c)
	}
	return string(append(b, '"'))
}
