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
first use (docs/security.md).`,
		setup: func(fs *flag.FlagSet) func(*env, []string) error {
			var df dbFlags
			df.register(fs)
			var (
				topic, key, payload, payloadFile, contentType, id string
				headers                                           listFlag
				delay, ttl                                        time.Duration
				maxAttempts                                       int
			)
			fs.StringVar(&topic, "topic", "", "message `TOPIC`, e.g. order.created (required)")
			fs.StringVar(&key, "key", "", "business `KEY`: messages with one key are delivered in order")
			fs.StringVar(&payload, "payload", "", "the body as `TEXT`")
			fs.StringVar(&payloadFile, "payload-file", "", "read the body from `FILE` (- for standard input)")
			fs.StringVar(&contentType, "content-type", "", "payload media `TYPE` (default application/json, which must be valid JSON)")
			fs.Var(&headers, "header", "header `NAME=VALUE` (repeatable)")
			fs.DurationVar(&delay, "delay", 0, "hold the message back for `DURATION` (e.g. 30s)")
			fs.DurationVar(&ttl, "ttl", 0, "expire the message `DURATION` after it is enqueued, by the database clock, if it is not delivered by then (e.g. 2m)")
			fs.IntVar(&maxAttempts, "max-attempts", 0, "publish attempts before the message goes dead (default 10)")
			fs.StringVar(&id, "id", "", "message id `UUID` (default a new one); an id already in the outbox is refused")
			sealIt := fs.Bool("seal", false, "seal the payload with the key file's current key")
			sealSubject := fs.String("seal-subject", "", "seal the payload under the data `SUBJECT`'s own key, e.g. customer:42 (implies --seal)")
			keysFile := keysFileFlag(fs)
			return func(e *env, pos []string) error {
				if err := noArgs("enqueue", pos); err != nil {
					return err
				}
				set := setFlags(fs)
				if topic == "" {
					return usagef("enqueue: --topic is required")
				}
				if set["payload"] == set["payload-file"] {
					return usagef("enqueue: give exactly one of --payload and --payload-file")
				}
				if delay < 0 {
					return usagef("enqueue: --delay must not be negative")
				}
				if ttl < 0 {
					return usagef("enqueue: --ttl must not be negative")
				}
				if maxAttempts < 0 {
					return usagef("enqueue: --max-attempts must not be negative")
				}
				msg := outbox.Message{
					Topic:       topic,
					Key:         key,
					ContentType: contentType,
					ID:          strings.ToLower(id),
					Delay:       delay,
					TTL:         ttl,
					MaxAttempts: maxAttempts,
				}
				for _, h := range headers {
					name, value, ok := strings.Cut(h, "=")
					if !ok || strings.TrimSpace(name) == "" {
						return usagef("enqueue: --header %q: want NAME=VALUE", h)
					}
					if msg.Headers == nil {
						msg.Headers = map[string]string{}
					}
					msg.Headers[strings.TrimSpace(name)] = value
				}
				db, cfg, err := e.openDB(df)
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
				if set["payload"] {
					msg.Payload = []byte(payload)
				} else if msg.Payload, err = e.readPayload(payloadFile, limit); err != nil {
					return err
				}
				msg.SealSubject = *sealSubject
				sealCfg, err := e.enqueueSeal(*sealIt || *sealSubject != "", *keysFile, cfg.KeysFile)
				if err != nil {
					return err
				}
				id, err := enqueue(e.ctx, db, msg, limit, sealCfg)
				if err != nil {
					return e.describeEnqueueError(db, err)
				}
				fmt.Fprintln(e.stdout, id)
				return nil
			}
		},
	}
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

// enqueue writes msg in a transaction of its own and wakes relays.
func enqueue(ctx context.Context, db *dburl.DB, msg outbox.Message, maxPayload int, sealCfg *outbox.SealConfig) (string, error) {
	// The command exits right after committing, so it wakes relays itself
	// below instead of leaving that to the producer's deferred signal.
	cfg := &outbox.Config{MaxPayloadBytes: maxPayload, DisableNotify: true, Seal: sealCfg}
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
