package store_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestInboxMigrationsCoverTheInbox: the inbox-only schema holds every
// migration statement that names outbox_inbox, and nothing else, so that
// `migrate --inbox-only` and a later full migrate never disagree.
func TestInboxMigrationsCoverTheInbox(t *testing.T) {
	names := regexp.MustCompile(`\boutbox_inbox\b`)
	for _, d := range testdb.Dialects {
		all, err := store.Migrations(d)
		if err != nil {
			t.Fatal(err)
		}
		inbox, err := store.InboxMigrations(d)
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, m := range all {
			for _, stmt := range strings.Split(m.SQL, ";") {
				var code []string
				for _, line := range strings.Split(stmt, "\n") {
					if !strings.HasPrefix(strings.TrimSpace(line), "--") {
						code = append(code, line)
					}
				}
				if names.MatchString(strings.Join(code, "\n")) {
					want++
				}
			}
		}
		got := 0
		for _, m := range inbox {
			got += strings.Count(m.SQL, ";")
			if strings.Contains(m.SQL, "outbox_messages") {
				t.Errorf("%s: inbox migration %s touches outbox_messages:\n%s", d, m.Name, m.SQL)
			}
		}
		if want == 0 || got != want || inbox[0].Version != 1 {
			t.Errorf("%s: %d inbox statements from %d versions, want the %d statements naming outbox_inbox, from version 1 on", d, got, len(inbox), want)
		}
	}
}
