package awswire

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/txoutbox/outbox/publisher"
	"github.com/txoutbox/outbox/publisher/outboxce"
)

// maxGroupIDLen is the longest MessageGroupId.
const maxGroupIDLen = 128

// Entry is one envelope on its way in a batch call.
type Entry struct {
	// I is the envelope's index in the batch; its decimal form (ID) is
	// the entry's id in the call.
	I    int
	Env  *publisher.Envelope
	Wire *Wire
	// Group is the MessageGroupId on a FIFO queue or topic, "" on a
	// standard one; the deduplication id is then the message id.
	Group string
}

// ID is the entry's id in its batch call.
func (e *Entry) ID() string { return strconv.Itoa(e.I) }

// Answer is what a batch call answered about its entries, by entry id.
type Answer struct {
	Done   []string // the entries published
	Failed []Failed
}

// Failed is an entry a batch call refused.
type Failed struct {
	ID, Code, Message string
	SenderFault       bool
}

// Batcher publishes envelopes with the batch calls of one service
// (SendMessageBatch to SQS queues, PublishBatch to SNS topics): it makes
// the entries, groups them by destination into calls within the limits,
// makes the calls a few at a time and reads each entry's result from the
// answers. The publisher gives it the call itself, with its SDK.
type Batcher struct {
	// Pkg begins every error ("outboxsqs").
	Pkg string
	// Dest is what a destination is, in errors ("queue", "topic").
	Dest string
	// Service is the service's name in errors ("SQS").
	Service string
	// Op is the batch call's name in errors ("SendMessageBatch").
	Op string
	// CloudEvents, when not nil, maps every message to a CloudEvent over
	// Binding.
	CloudEvents *outboxce.Format
	Binding     outboxce.Binding
	// MaxEntries and MaxBytes are the most entries and bytes of one call
	// (and MaxBytes the largest message).
	MaxEntries, MaxBytes int
	// Concurrency is how many calls one Publish makes at a time.
	Concurrency int
	// ThrottleWait is how long the route is held when the service
	// throttles.
	ThrottleWait time.Duration
	// ErrClosed is every message's result after Close.
	ErrClosed error
	// Kind is what an error code of the service says about the route.
	Kind func(code string) Kind
	// Call makes one call of entries to dest. When the whole call fails it
	// returns the error classified by CallError, and how it failed.
	Call func(ctx context.Context, dest string, entries []*Entry) (*Answer, Failure, error)

	closed atomic.Bool
}

// Publish sends batch, each envelope to the destination dest gives it (or
// the reason it cannot be sent), in calls of at most MaxEntries entries
// and MaxBytes bytes, Concurrency at a time. Results are in batch order;
// nil only for a message the service reported published.
func (b *Batcher) Publish(ctx context.Context, batch []*publisher.Envelope, dest func(*publisher.Envelope) (string, error)) []error {
	errs := make([]error, len(batch))
	if b.closed.Load() {
		for i := range errs {
			errs[i] = b.ErrClosed
		}
		return errs
	}
	// Entries by destination, in batch order.
	byDest := map[string][]*Entry{}
	var order []string
	for i, env := range batch {
		if env == nil {
			errs[i] = publisher.Permanent(errors.New(b.Pkg + ": nil envelope"))
			continue
		}
		d, err := dest(env)
		if err != nil {
			errs[i] = err
			continue
		}
		e, err := b.entry(i, env, d)
		if err != nil {
			errs[i] = err
			continue
		}
		if _, ok := byDest[d]; !ok {
			order = append(order, d)
		}
		byDest[d] = append(byDest[d], e)
	}
	var calls [][]*Entry
	var callDest []string
	for _, d := range order {
		for _, c := range Split(byDest[d], entrySize, b.MaxEntries, b.MaxBytes) {
			calls = append(calls, c)
			callDest = append(callDest, d)
		}
	}
	sem := make(chan struct{}, b.Concurrency)
	var wg sync.WaitGroup
	for n, c := range calls {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			b.send(ctx, callDest[n], c, errs)
		}()
	}
	wg.Wait()
	return errs
}

// Close makes later Publish calls fail with ErrClosed.
func (b *Batcher) Close() { b.closed.Store(true) }

// entry builds the entry of env to dest, or the reason it cannot be sent.
func (b *Batcher) entry(i int, env *publisher.Envelope, dest string) (*Entry, error) {
	w, err := Encode(env, b.CloudEvents, b.Binding)
	if err != nil {
		return nil, publisher.Permanent(fmt.Errorf("%s: %s %s: message %s: %v", b.Pkg, b.Dest, dest, env.ID, err))
	}
	if n := w.Size(); n > b.MaxBytes {
		return nil, publisher.Permanent(fmt.Errorf("%s: %s %s: message too large: %d bytes, %s takes at most %d", b.Pkg, b.Dest, dest, n, b.Service, b.MaxBytes))
	}
	e := &Entry{I: i, Env: env, Wire: w}
	if strings.HasSuffix(dest, ".fifo") {
		group := env.Key
		if group == "" {
			group = env.Topic
		}
		e.Group = GroupID(group)
	}
	return e, nil
}

func entrySize(e *Entry) int { return e.Wire.Size() }

// send makes one call and sets the result of each of its entries in errs.
func (b *Batcher) send(ctx context.Context, dest string, entries []*Entry, errs []error) {
	if err := ctx.Err(); err != nil {
		for _, e := range entries {
			errs[e.I] = fmt.Errorf("%s: %s %s: not sent: %v", b.Pkg, b.Dest, dest, err)
		}
		return
	}
	a, how, err := b.Call(ctx, dest, entries)
	if err != nil {
		if how == FailMessages && len(entries) > 1 {
			// The call was refused for a reason no entry was given: send
			// them one by one to find the message at fault.
			for _, e := range entries {
				b.send(ctx, dest, []*Entry{e}, errs)
			}
			return
		}
		if how == FailMessages {
			err = publisher.Permanent(err)
		}
		for _, e := range entries {
			errs[e.I] = err
		}
		return
	}
	byID := make(map[string]*Entry, len(entries))
	for _, e := range entries {
		byID[e.ID()] = e
	}
	for _, id := range a.Done {
		if e := byID[id]; e != nil {
			errs[e.I] = nil
			delete(byID, id)
		}
	}
	for _, f := range a.Failed {
		if e := byID[f.ID]; e != nil {
			errs[e.I] = b.entryError(dest, f)
			delete(byID, f.ID)
		}
	}
	for _, e := range byID {
		errs[e.I] = publisher.Unknown(fmt.Errorf("%s: %s %s: %s answered nothing about message %s", b.Pkg, b.Dest, dest, b.Op, e.Env.ID))
	}
}

// PlainName reports whether s has only letters, digits, '-' and '_', as
// the names of queues and topics (before a .fifo suffix) have.
func PlainName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// GroupID is the MessageGroupId of a business key (the topic when the
// message has none) on a FIFO queue or topic: the key itself when it is 1
// to 128 characters of letters, digits and ASCII punctuation, as SQS
// requires; otherwise "sha256-" and the hex SHA-256 of the key, so that
// each key still has a group of its own.
func GroupID(key string) string {
	ok := key != "" && len(key) <= maxGroupIDLen
	for i := 0; ok && i < len(key); i++ {
		ok = key[i] > ' ' && key[i] < 0x7f
	}
	if ok {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256-" + hex.EncodeToString(sum[:])
}
