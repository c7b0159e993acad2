package outbox

import (
	"strings"
	"testing"
	"time"
)

func TestAlertConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  AlertConfig
		want string
	}{
		{AlertConfig{WebhookURL: "ftp://x"}, "WebhookURL"},
		{AlertConfig{WebhookURL: "https://"}, "WebhookURL"},
		{AlertConfig{WebhookURL: "hooks.slack.com/services/T/B/secret"}, "WebhookURL"},
		{AlertConfig{OldestPendingAge: -1}, "OldestPendingAge"},
		{AlertConfig{MinInterval: -1}, "MinInterval"},
		{AlertConfig{WebhookURL: "https://hooks.example.com/x", OldestPendingAge: time.Minute}, ""},
	} {
		err := c.cfg.validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.cfg, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: error %v, want one naming %s", c.cfg, err, c.want)
		case err != nil && strings.Contains(err.Error(), "secret"):
			t.Errorf("error repeats the URL: %v", err)
		}
	}
}
