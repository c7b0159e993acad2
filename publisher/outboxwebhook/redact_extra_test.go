package outboxwebhook_test

import (
	"strings"
	"testing"

	"github.com/txoutbox/outbox/publisher/outboxwebhook"
)

func TestRedactPasswordThatLooksLikeAPort(t *testing.T) {
	for _, raw := range []string{
		"redis://user:123/rest@host:6379/0",
		"amqp://guest:4242/x?y@rabbit:5672/vhost",
		"kafka://u:99#frag@broker:9092",
	} {
		got := outboxwebhook.Redact(raw)
		for _, secret := range []string{"123/rest", "4242/x", "99#frag"} {
			if strings.Contains(got, secret) {
				t.Errorf("Redact(%q) = %q leaks %q", raw, got, secret)
			}
		}
	}
}
