package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestRelayRetentionAndAlertFlags: 'outbox relay' applies its retention
// and alert settings — an old sent message is removed, a message without a
// route goes dead and is alerted to the webhook — and never prints the
// webhook URL, whose path carries a token.
func TestRelayRetentionAndAlertFlags(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var alerts []map[string]any
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a map[string]any
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &a); err == nil {
			mu.Lock()
			alerts = append(alerts, a)
			mu.Unlock()
		}
	}))
	defer hook.Close()
	const token = "T0001/B0002/hook-token-8675309"

	db := testdb.New(t, store.SQLite)
	vars := dbVars(db)
	old := enqueueOK(t, vars, "--topic", "order.created", "--payload", "{}")
	db.Exec(t, "UPDATE outbox_messages SET status = 'sent', sent_at = strftime('%Y-%m-%d %H:%M:%f', 'now', '-2 hours') WHERE message_id = ?", old)
	lost := enqueueOK(t, vars, "--topic", "mail.bounced", "--payload", "{}")

	vars["OUTBOX_ALERT_WEBHOOK"] = hook.URL + "/services/" + token
	// Retention from the config file, the alert webhook from the
	// environment, the interval from a flag: all three sources apply.
	cfg := writeFile(t, "relay.yaml", "retention:\n  sent: 1h\n  interval: 10m\nalerts:\n  interval: 1m\n")
	_, stderr, stop := startCLI(t, vars, "relay", "--config", cfg, "--route", "order.*=stdout://", "--admin", "127.0.0.1:0",
		"--retention-interval", "100ms", "--max-poll", "50ms")
	waitFor(t, "the old sent message removed", func() bool {
		return db.Count(t, "SELECT count(*) FROM outbox_messages WHERE message_id = ?", old) == 0
	})
	waitFor(t, "an alert about the dead message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, a := range alerts {
			if text, _ := a["text"].(string); strings.Contains(text, "dead") && strings.Contains(string(mustJSON(t, a)), lost) {
				return true
			}
		}
		return false
	})
	if code := stop(); code != 0 {
		t.Fatalf("relay exited %d: %s", code, stderr.String())
	}
	if strings.Contains(stderr.String(), "hook-token-8675309") {
		t.Errorf("the alert webhook's token was printed:\n%s", stderr.String())
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRelayFlagErrors: bad retention and alert settings are usage errors
// naming the flag or variable, before anything runs.
func TestRelayFlagErrors(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"OUTBOX_DATABASE_URL": "sqlite:///nonexistent/never-opened.db"}
	badSent := writeFile(t, "retention.yaml", "retention:\n  sent: a day\n")
	badArchive := writeFile(t, "archive.yaml", "retention:\n  archive: sometimes\n")
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"--alert-pending-age", "-1s"}, "--alert-pending-age must not be negative"},
		{nil, []string{"--retention-interval", "0s"}, "--retention-interval must be positive"},
		{map[string]string{"OUTBOX_RETENTION_DEAD": "two weeks"}, nil, `OUTBOX_RETENTION_DEAD: "two weeks" is not a positive duration`},
		{nil, []string{"--no-retention", "--retention-sent", "1h"}, "conflicts with --no-retention"},
		{nil, []string{"--config", badSent}, `retention.sent: "a day" is not a duration`},
		{nil, []string{"--config", badArchive}, `retention.archive: "sometimes" is not true or false`},
		{map[string]string{"OUTBOX_ALERT_WEBHOOK": "ftp://alerts.example.com/x"}, nil, "OUTBOX_ALERT_WEBHOOK: want an http:// or https:// URL"},
	} {
		v := map[string]string{}
		for k, val := range vars {
			v[k] = val
		}
		for k, val := range c.env {
			v[k] = val
		}
		run(t, v, append([]string{"relay", "--to", "stdout://"}, c.args...)...).failed(t, 2, c.want)
	}
}
