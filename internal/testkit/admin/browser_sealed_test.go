package admin_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/admin"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/syncbuf"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/internal/testkit/testserver"
)

// page is the operator page in a headless Chromium of the test's own.
type page struct {
	t    *testing.T
	bctx context.Context
	url  string
}

// openPage starts Chromium for the page served at url; it stops at the
// end of the test.
func openPage(t *testing.T, url string) *page {
	t.Helper()
	chrome := testserver.Chromium(t)
	var browserLog syncbuf.Buffer
	actx, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.CombinedOutput(&browserLog))...)
	t.Cleanup(cancel)
	bctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	bctx, cancel = context.WithTimeout(bctx, 90*time.Second)
	t.Cleanup(cancel)
	t.Cleanup(func() {
		if out := browserLog.String(); t.Failed() && out != "" {
			t.Logf("browser output:\n%s", testserver.ChromiumLog(out, 20))
		}
	})
	return &page{t: t, bctx: bctx, url: url}
}

func (p *page) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.bctx, steps...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

func (p *page) until(what, cond, show string) {
	p.t.Helper()
	untilPage(p.t, p.bctx, what, cond, show, func() {})
}

// has reports whether the page's document, every dialog included,
// contains s anywhere: text, attributes (titles) or form values.
func (p *page) has(s string) bool {
	p.t.Helper()
	q := strconv.Quote(s)
	found, err := chromedp.Run(p.bctx, chromedp.Evaluate[bool](`document.documentElement.outerHTML.includes(`+q+`) ||
		[...document.querySelectorAll('input, textarea')].some(e => e.value.includes(`+q+`))`))
	if err != nil {
		p.t.Fatalf("reading the page: %v", err)
	}
	return found
}

// signIn signs in with token from a fresh load of the page.
func (p *page) signIn(token string) {
	p.t.Helper()
	p.do("sign in",
		chromedp.Navigate(p.url+"/"),
		chromedp.WaitVisible(chromedp.ID("token-input")),
		chromedp.SendKeys(chromedp.ID("token-input"), token),
		chromedp.Click(chromedp.ID("token-submit")),
		chromedp.WaitVisible(chromedp.ID("view-overview")),
	)
}

// signOut forgets the token.
func (p *page) signOut() {
	p.t.Helper()
	p.do("sign out", chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("token-input")))
}

// search lists the messages of topic in the search view and waits for n
// rows.
func (p *page) search(topic string, n int) {
	p.t.Helper()
	p.do("search "+topic,
		chromedp.Navigate(p.url+"/#search"),
		chromedp.WaitVisible(chromedp.ID("search-form")),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('search-form').reset()`),
		chromedp.SendKeys(chromedp.ID("search-topic"), topic),
		chromedp.Click(chromedp.ID("search-submit")),
	)
	p.until(fmt.Sprintf("%d results for %s", n, topic), fmt.Sprintf(`(() => {
		const r = [...document.querySelectorAll('#search-table tbody tr')];
		return r.length === %d && r.every(tr => tr.cells[1].textContent === %q);
	})()`, n, topic), `document.getElementById('search-table').textContent`)
}

// open opens the detail of message id from the list table.
func (p *page) open(table, id string) {
	p.t.Helper()
	p.do("open "+id, clickRow(table, id), chromedp.WaitVisible(chromedp.ID("detail")))
	p.until("the detail of "+id, `document.querySelector('#detail-fields code') && document.querySelector('#detail-fields code').textContent === '`+id+`'`,
		`document.getElementById('detail-fields').textContent`)
}

func (p *page) closeDetail() {
	p.t.Helper()
	p.do("close the detail", chromedp.Click(chromedp.ID("detail-close")), chromedp.WaitNotVisible(chromedp.ID("detail")))
}

// TestBrowserSealedPayload drives the page in headless Chromium over a
// sealed message (made dead) on PostgreSQL: signed in with a token
// without the read-payloads permission, the search and dead-letter lists
// and the detail show "sealed, key k1", never the
// plain text anywhere in the document; signed in with a token that has
// the permission, on a server holding the key, the detail shows the plain
// payload and the sealed header, while the lists still do not.
func TestBrowserSealedPayload(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping in -short mode: needs PostgreSQL and Chromium")
	}
	t.Parallel()
	db := testdb.New(t, store.Postgres)
	keys := relaytest.KeyFile(t)
	const plain = `{"email":"erin@example.com","card":"4111-1111"}`
	ids := relaytest.Produce(t, db, &outbox.Config{Seal: &outbox.SealConfig{Keys: keys, Topics: []string{"user.*"}, Headers: []string{"x-email"}}},
		outbox.Message{Topic: "user.created", Key: "u-1", Payload: []byte(plain), Headers: map[string]string{"x-email": "erin@example.com"}},
		outbox.Message{Topic: "order.created", Key: "o-1", Payload: []byte(`{"order":1}`)},
	)
	id := ids[0]
	db.Exec(t, "UPDATE outbox_messages SET status = 'dead', attempts = 10, last_error = 'refused' WHERE message_id = $1", id)

	const readerToken = "reader-token-page-4b8"
	srv := newAdmin(t, db, &admin.Config{Keys: keys, Tokens: []admin.Token{
		{Name: "ops", Secret: opsToken}, {Name: "reader", Secret: readerToken, Permissions: []string{admin.PermReadPayloads}}}})
	pg := openPage(t, srv.URL)
	secrets := []string{"erin@example.com", "4111-1111", "erin@"}
	noPlain := func(where string) {
		t.Helper()
		for _, s := range secrets {
			if pg.has(s) {
				t.Errorf("%s: the page holds the plain text %q", where, s)
			}
		}
	}
	// lists checks that both lists say "sealed, key k1", not the plain
	// text.
	lists := func(who string) {
		t.Helper()
		pg.search("user.created", 1)
		pg.until(who+": sealed, key k1 in the search list", `(() => {
			const c = document.querySelector('#search-table tr[data-message-id="`+id+`"] .payload-preview');
			return c && c.textContent === 'sealed, key k1';
		})()`, `document.getElementById('search-table').textContent`)
		pg.do(who+": open the dead letters", chromedp.Navigate(srv.URL+"/#dead"))
		pg.until(who+": sealed, key k1 in the dead list", `(() => {
			const c = document.querySelector('#dead-table tr[data-message-id="`+id+`"] .payload-preview');
			return c && c.textContent === 'sealed, key k1';
		})()`, `document.getElementById('dead-table').textContent`)
		noPlain(who + ": the lists")
	}

	// Without the permission: "sealed, key k1" and the reason.
	pg.signIn(opsToken)
	lists("ops")
	pg.open("#dead-table", id)
	pg.until("ops: the detail says sealed, key k1", `document.getElementById('detail-payload').textContent === 'sealed, key k1' &&
		document.getElementById('detail-payload-kind').textContent.includes('read-payloads') &&
		document.getElementById('detail-headers').textContent.includes('outbox-seal-key')`,
		`document.getElementById('detail-payload-kind').textContent + ' | ' + document.getElementById('detail-payload').textContent`)
	noPlain("ops: the detail")
	pg.closeDetail()
	pg.signOut()

	// With it, on a server that holds the key: the plain text in the
	// detail only.
	pg.signIn(readerToken)
	lists("reader")
	pg.search("user.created", 1)
	pg.open("#search-table", id)
	pg.until("reader: the detail shows the plain payload and header", `document.getElementById('detail-payload').textContent.includes('"email": "erin@example.com"') &&
		document.getElementById('detail-payload-kind').textContent === '(opened, JSON)' &&
		[...document.querySelectorAll('#detail-headers tr.sealed-header')].some(tr => tr.textContent.includes('x-email (sealed)') && tr.textContent.includes('erin@example.com'))`,
		`document.getElementById('detail-payload-kind').textContent + ' | ' + document.getElementById('detail-payload').textContent + ' | ' + document.getElementById('detail-headers').textContent`)
	if !pg.has("erin@example.com") {
		t.Fatal("the opened payload is not found in the document: the checks for plain text would find nothing either")
	}
	// Closed and signed out, without reloading, nothing of it stays.
	pg.closeDetail()
	pg.signOut()
	noPlain("after the reader closed the detail and signed out")
}

// TestBrowserClaimCheckedPayload drives the page in headless Chromium
// over claim-checked messages on PostgreSQL, their blob store gone: the
// detail shows "claim check: file:KEY, N bytes" and the digest in place
// of the empty payload, a sealed one with its key, and never a blob's
// bytes; a small message shows its payload.
func TestBrowserClaimCheckedPayload(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping in -short mode: needs PostgreSQL and Chromium")
	}
	t.Parallel()
	db := testdb.New(t, store.Postgres)
	large, sealed := largeJSON(1000, "LARGE-PLAIN-7c1"), largeJSON(500, "LARGE-SEALED-3e9")
	_, keys, ids := claimedMessages(t, db, large, sealed)
	srv := newAdmin(t, db, &admin.Config{Keys: keys, Tokens: []admin.Token{{Name: "ops", Secret: opsToken, Permissions: []string{admin.PermReadPayloads}}}})
	pg := openPage(t, srv.URL)
	pg.signIn(opsToken)

	sum := sha256.Sum256(large)
	digest := hex.EncodeToString(sum[:])
	want := fmt.Sprintf("claim check: file:%s.%s, %d bytes", ids[0], digest, len(large))
	pg.search("document.scanned", 1)
	pg.open("#search-table", ids[0])
	pg.until("the claim check in the detail", `(() => {
		const p = document.getElementById('detail-payload').textContent;
		return p === `+strconv.Quote(want+"\nsha256 "+digest)+` &&
			document.getElementById('detail-payload-kind').textContent === '(kept in a blob store, not shown here)' &&
			document.getElementById('detail-headers').textContent.includes('outbox-claim-check-sha256');
	})()`, `document.getElementById('detail-payload-kind').textContent + ' | ' + document.getElementById('detail-payload').textContent`)
	pg.closeDetail()

	pg.search("secret.scanned", 1)
	pg.open("#search-table", ids[1])
	pg.until("the sealed claim check in the detail", `(() => {
		const p = document.getElementById('detail-payload').textContent;
		return p.startsWith('claim check: file:`+ids[1]+`.') && p.includes(' bytes (sealed, key k1)\nsha256 ');
	})()`, `document.getElementById('detail-payload').textContent`)
	pg.closeDetail()

	pg.search("document.small", 1)
	pg.open("#search-table", ids[2])
	pg.until("the small payload in the detail", `document.getElementById('detail-payload').textContent.includes('"small": true') &&
		document.getElementById('detail-payload-kind').textContent === '(JSON)'`, `document.getElementById('detail-payload').textContent`)
	if pg.has("LARGE-") {
		t.Error("the page holds a blob's bytes")
	}
}
