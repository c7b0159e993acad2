package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/internal/dburl"
)

func enqueueCommand() *command {
	return &command{
		name:     "enqueue",
		synopsis: "--topic T [--key K] (--payload TEXT | --payload-file F) [--seal [--seal-subject S] [--keys FILE]] [flags]",
		summary:  "enqueue one message (operations, scripts)",
		about: `Enqueues one message in its own transaction and prints its message id.
The payload is JSON unless --content-type says otherwise; --payload-file -
reads it from standard input. --seal encrypts the payload under the key
file's current key (--keys FILE, else OUTBOX_KEYS_FILE, else the config's
keys_file), --seal-subject S under the data subject's own key, created on
first use (docs/security.md). With a claim-check store (--claim-check DIR
or s3://BUCKET/PREFIX, else OUTBOX_CLAIM_CHECK_DIR, else the config's
claim_check, as the relay takes it), a payload over --claim-threshold
bytes is written to the store and the row holds a reference to it
(docs/claim-check.md).`,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			var f enqueueFlags
			f.register(fs)
			return func(e *env, pos []string) error {
				if err := noArgs("enqueue", pos); err != nil {
					return err
				}
				set := setFlags(fs)
				msg, err := f.message(set)
				if err != nil {
					return err
				}
				db, cfg, err := e.openDB(f.db)
				if err != nil {
					return err
				}
				defer db.Close()
				limit := outbox.DefaultMaxPayloadBytes
				if cfg.Relay.MaxPayloadBytes != "" {
					if limit, err = parseCount(cfg.field("relay.max_payload_bytes"), cfg.Relay.MaxPayloadBytes); err != nil {
						return err
					}
				}
				claimCfg, err := e.enqueueClaimCheck(&resolver{e: e, set: set, cfg: cfg}, f.claimCheck, f.claimThreshold)
				if err != nil {
					return err
				}
				readLimit := limit
				if claimCfg != nil {
					readLimit = max(limit, outbox.DefaultClaimCheckMaxPayloadBytes)
				}
				if set["payload"] {
					msg.Payload = []byte(f.payload)
				} else if msg.Payload, err = e.readPayload(f.payloadFile, readLimit); err != nil {
					return err
				}
				sealCfg, err := e.enqueueSeal(f.seal || f.sealSubject != "", *f.keysFile, cfg.KeysFile)
				if err != nil {
					return err
				}
				id, err := enqueue(e.ctx, db, msg, &outbox.Config{MaxPayloadBytes: limit, Seal: sealCfg, ClaimCheck: claimCfg})
				if err != nil {
					return e.describeEnqueueError(db, err)
				}
				fmt.Fprintln(e.stdout, id)
				return nil
			}
		},
	}
}

// enqueueFlags are the flags of `outbox enqueue`.
type enqueueFlags struct {
	db                                                dbFlags
	topic, key, payload, payloadFile, contentType, id string
	headers                                           listFlag
	delay, ttl                                        time.Duration
	maxAttempts                                       int
	seal                                              bool
	sealSubject                                       string
	keysFile                                          *string
	claimCheck                                        string
	claimThreshold                                    int
}

func (f *enqueueFlags) register(fs *flag.FlagSet) {
	f.db.register(fs)
	fs.StringVar(&f.topic, "topic", "", "message `TOPIC`, e.g. order.created (required)")
	fs.StringVar(&f.key, "key", "", "business `KEY`: messages with one key are delivered in order")
	fs.StringVar(&f.payload, "payload", "", "the body as `TEXT`")
	fs.StringVar(&f.payloadFile, "payload-file", "", "read the body from `FILE` (- for standard input)")
	fs.StringVar(&f.contentType, "content-type", "", "payload media `TYPE` (default application/json, which must be valid JSON)")
	fs.Var(&f.headers, "header", "header `NAME=VALUE` (repeatable)")
	fs.DurationVar(&f.delay, "delay", 0, "hold the message back for `DURATION` (e.g. 30s)")
	fs.DurationVar(&f.ttl, "ttl", 0, "expire the message `DURATION` after it is enqueued, by the database clock, if it is not delivered by then (e.g. 2m)")
	fs.IntVar(&f.maxAttempts, "max-attempts", 0, "publish attempts before the message goes dead (default 10)")
	fs.StringVar(&f.id, "id", "", "message id `UUID` (default a new one); an id already in the outbox is refused")
	fs.BoolVar(&f.seal, "seal", false, "seal the payload with the key file's current key")
	fs.StringVar(&f.sealSubject, "seal-subject", "", "seal the payload under the data `SUBJECT`'s own key, e.g. customer:42 (implies --seal)")
	f.keysFile = keysFileFlag(fs)
	fs.StringVar(&f.claimCheck, "claim-check", "", "write a payload over --claim-threshold to the blob store `DIR` (or s3://BUCKET/PREFIX?region=R, gs://BUCKET/PREFIX) and a reference to it in the row, as the relay's --claim-check takes it (default $OUTBOX_CLAIM_CHECK_DIR, else the config's claim_check; docs/claim-check.md)")
	fs.IntVar(&f.claimThreshold, "claim-threshold", outbox.DefaultClaimCheckThreshold, "with a claim-check store, payloads of more than `BYTES` go to it")
}

// message checks the flags (set: those given) and returns the message
// they describe, without its payload.
func (f *enqueueFlags) message(set map[string]bool) (outbox.Message, error) {
	switch {
	case f.topic == "":
		return outbox.Message{}, usagef("enqueue: --topic is required")
	case set["payload"] == set["payload-file"]:
		return outbox.Message{}, usagef("enqueue: give exactly one of --payload and --payload-file")
	case f.delay < 0:
		return outbox.Message{}, usagef("enqueue: --delay must not be negative")
	case f.ttl < 0:
		return outbox.Message{}, usagef("enqueue: --ttl must not be negative")
	case f.maxAttempts < 0:
		return outbox.Message{}, usagef("enqueue: --max-attempts must not be negative")
	case f.claimThreshold < 1:
		return outbox.Message{}, usagef("enqueue: --claim-threshold must be at least 1 byte")
	}
	msg := outbox.Message{
		Topic:       f.topic,
		Key:         f.key,
		ContentType: f.contentType,
		ID:          strings.ToLower(f.id),
		Delay:       f.delay,
		TTL:         f.ttl,
		MaxAttempts: f.maxAttempts,
		SealSubject: f.sealSubject,
	}
	for _, h := range f.headers {
		name, value, ok := strings.Cut(h, "=")
		if !ok || strings.TrimSpace(name) == "" {
			return outbox.Message{}, usagef("enqueue: --header %q: want NAME=VALUE", h)
		}
		if msg.Headers == nil {
			msg.Headers = map[string]string{}
		}
		msg.Headers[strings.TrimSpace(name)] = value
	}
	return msg, nil
}

// readPayload reads a payload file, or standard input for "-", reading at
// most one byte past limit so an oversized payload is reported, not loaded.
func (e *env) readPayload(name string, limit int) ([]byte, error) {
	var r io.Reader
	if name == "-" {
		r = e.stdin
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, usagef("enqueue: --payload-file: %v", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("enqueue: read payload: %w", err)
	}
	return b, nil
}

// enqueueClaimCheck is the claim check of `outbox enqueue`: the store of
// --claim-check, else OUTBOX_CLAIM_CHECK_DIR, else the config's
// claim_check (a directory, or a URL of a registered scheme, as the
// relay's), with --claim-threshold; nil without a store.
func (e *env) enqueueClaimCheck(r *resolver, flagVal string, threshold int) (*outbox.ClaimCheckConfig, error) {
	where := r.text("claim-check", flagVal, "OUTBOX_CLAIM_CHECK_DIR", r.cfg.ClaimCheck)
	if where == "" {
		if r.set["claim-check"] {
			return nil, usagef("enqueue: --claim-check: empty: give a directory or s3://BUCKET/PREFIX")
		}
		if r.set["claim-threshold"] {
			return nil, usagef("enqueue: --claim-threshold needs a claim-check store: give --claim-check DIR (or s3://BUCKET/PREFIX) or OUTBOX_CLAIM_CHECK_DIR")
		}
		return nil, nil
	}
	st, err := openClaimStore(e.ctx, where)
	if err != nil {
		return nil, usagef("enqueue: --claim-check: %s", errorLine(err))
	}
	return &outbox.ClaimCheckConfig{Store: st, Threshold: threshold}, nil
}

// enqueue writes msg in a transaction of its own with a producer of cfg
// and wakes relays.
func enqueue(ctx context.Context, db *dburl.DB, msg outbox.Message, cfg *outbox.Config) (string, error) {
	// The command exits right after committing, so it wakes relays itself
	// below instead of leaving that to the producer's deferred signal.
	cfg.DisableNotify = true
	var id string
	if db.PGX != nil {
		p, err := outbox.NewProducer(db.PGX, cfg)
		if err != nil {
			return "", err
		}
		tx, err := db.Pool.Begin(ctx)
		if err != nil {
			return "", err
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		if id, err = p.Enqueue(ctx, tx, msg); err != nil {
			return "", err
		}
		if err := tx.Commit(ctx); err != nil {
			return "", fmt.Errorf("commit: %w", err)
		}
	} else {
		p, err := outbox.NewProducer(db.Std, cfg)
		if err != nil {
			return "", err
		}
		tx, err := db.SQL.BeginTx(ctx, nil)
		if err != nil {
			return "", err
		}
		defer func() { _ = tx.Rollback() }()
		if id, err = p.Enqueue(ctx, tx, msg); err != nil {
			return "", err
		}
		if err := tx.Commit(); err != nil {
			return "", fmt.Errorf("commit: %w", err)
		}
	}
	if notify := db.Backend().Notify; notify != nil {
		nctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_ = notify(nctx) // relays poll as well; a lost wake-up only costs latency
	}
	return id, nil
}

// flagOfField names the flag behind a Message field in validation errors.
var flagOfField = map[string]string{
	"Topic":       "--topic",
	"Key":         "--key",
	"Payload":     "payload",
	"ContentType": "--content-type",
	"Headers":     "--header",
	"ID":          "--id",
	"Delay":       "--delay",
	"TTL":         "--ttl",
	"MaxAttempts": "--max-attempts",
}

// describeEnqueueError words a rejected message in terms of the flags.
func (e *env) describeEnqueueError(db *dburl.DB, err error) error {
	var v *outbox.ValidationError
	switch {
	case errors.As(err, &v):
		name := flagOfField[v.Field]
		if name == "" {
			name = v.Field
		}
		return usagef("enqueue: %s: %v: %s", name, v.Err, v.Detail)
	case errors.Is(err, outbox.ErrDuplicateMessageID):
		return fmt.Errorf("enqueue: %s", strings.TrimPrefix(errorLine(err), "outbox: "))
	}
	// The producer's errors read "outbox: enqueue: …"; say it once.
	return e.schemaHint(db, "enqueue", errors.New(strings.TrimPrefix(errorLine(err), "enqueue: ")))
}
