package cli

import (
	"flag"
	"log/slog"
	"net/url"
	"strings"

	"github.com/txoutbox/outbox/publisher/outboxwebhook"
	"github.com/txoutbox/outbox/webhooksig"
)

// webhookFlags are the relay's flags about webhook signing.
type webhookFlags struct {
	allowShortSecret bool
}

func (f *webhookFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.allowShortSecret, "webhook-allow-short-secret", false,
		"accept webhook secrets shorter than 16 bytes (after whsec_ decoding) on every route (default: refused; the config's webhook_allow_short_secret, a route's allow_short_secret)")
}

// isWebhook reports whether a route's destination URL is a webhook.
func isWebhook(rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && (strings.EqualFold(u.Scheme, "http") || strings.EqualFold(u.Scheme, "https"))
}

// checkWebhookSecrets refuses a webhook route whose secret's key is
// shorter than outboxwebhook.MinSecretBytes, unless the route, the config
// file or the command line allows it. The message names the route, never
// the secret. A secret that is not a key at all (a bad whsec_) is left to
// the publisher, which says why.
func checkWebhookSecrets(specs []routeSpec) error {
	for _, s := range specs {
		if s.secret == "" || s.allowShort || !isWebhook(s.url) {
			continue
		}
		key, err := webhooksig.ParseSecret(s.secret)
		if err == nil && len(key) < outboxwebhook.MinSecretBytes {
			return usagef("relay: %s: the webhook secret is shorter than %d bytes (after whsec_ decoding); use a longer one (whsec_ and the base64 of 32 random bytes), or allow it: the route's allow_short_secret: true, the config's webhook_allow_short_secret: true or --webhook-allow-short-secret",
				s.source, outboxwebhook.MinSecretBytes)
		}
	}
	return nil
}

// warnUnsignedWebhooks logs, once per route at start, each webhook route
// that has no secret: its receivers get unsigned requests and cannot tell
// them from anyone else's.
func warnUnsignedWebhooks(specs []routeSpec, logger *slog.Logger) {
	for _, s := range specs {
		if s.secret != "" || !isWebhook(s.url) {
			continue
		}
		name := s.name
		if name == "" {
			name = s.pattern
		}
		logger.Warn("outbox relay: webhook route without a secret: its requests go unsigned (set the route's secret, OUTBOX_WEBHOOK_SECRET or webhook_secret)",
			"route", name, "from", s.source)
	}
}
