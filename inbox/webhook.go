package inbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/txoutbox/outbox/webhooksig"
)

// WebhookConfig configures WebhookHandler.
type WebhookConfig struct {
	// Secret is the Standard Webhooks secret shared with the relay
	// (a "whsec_" base64 secret or raw bytes). Required.
	Secret string
	// Tolerance is how far a webhook-timestamp may be from now. Defaults to
	// 5 minutes.
	Tolerance time.Duration
	// MaxBodyBytes bounds a request body. Defaults to 2 MiB.
	MaxBodyBytes int64
	// Logger receives handler failures. Defaults to slog.Default().
	Logger *slog.Logger
}

// WebhookHandler receives signed webhooks from the relay and applies each
// message exactly once: it verifies the Standard Webhooks signature and
// timestamp, then runs fn through ib.Handle in one transaction with the
// inbox record.
//
// The delivery may be the plain wire or a CloudEvent, binary or
// structured (see DecodeHTTP); the inbox dedupes by the same message id
// either way.
//
// Answers: 204 when fn ran and committed, or for a repeat delivery (fn not
// called); 401 for a missing or bad signature (or a secret mismatch); 400
// for a timestamp outside the tolerance or a CloudEvent that cannot be
// read; 413 for an oversized body; 500
// when fn or the database failed — nothing was recorded and the relay
// retries.
func WebhookHandler[TTx any](ib *Inbox[TTx], cfg *WebhookConfig, fn func(ctx context.Context, tx TTx, m *Message) error) (http.Handler, error) {
	if ib == nil || fn == nil {
		return nil, errors.New("inbox: WebhookHandler: nil inbox or handler")
	}
	if cfg == nil || cfg.Secret == "" {
		return nil, errors.New("inbox: WebhookConfig.Secret is required")
	}
	c := *cfg
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 2 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if _, err := webhooksig.ParseSecret(c.Secret); err != nil {
		return nil, errors.New("inbox: WebhookConfig.Secret: a whsec_ secret must be followed by base64")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, c.MaxBodyBytes))
		if err != nil {
			http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
			return
		}
		if err := webhooksig.Verify(c.Secret, r.Header, body, c.Tolerance, time.Now()); err != nil {
			status := http.StatusUnauthorized
			if errors.Is(err, webhooksig.ErrTimestampOutOfRange) || errors.Is(err, webhooksig.ErrInvalidTimestamp) {
				status = http.StatusBadRequest
			}
			http.Error(w, err.Error(), status)
			return
		}
		m, err := DecodeHTTP(r.Header, body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ctx := m.Context(r.Context())
		if _, err := ib.Handle(ctx, m.ID, func(ctx context.Context, tx TTx) error { return fn(ctx, tx, m) }); err != nil {
			c.Logger.Warn("inbox: webhook handler failed; the relay will retry", "consumer", ib.Consumer(), "message_id", m.ID, "topic", m.Topic, "err", err)
			http.Error(w, fmt.Sprintf("handler failed for %s", m.ID), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}), nil
}
