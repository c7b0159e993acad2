package admin_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/txoutbox/outbox"
	"github.com/txoutbox/outbox/admin"
	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/syncbuf"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
	"github.com/txoutbox/outbox/internal/testkit/testserver"
	"github.com/txoutbox/outbox/publisher"
)

// artifactDir is where screenshots go: $OUTBOX_ARTIFACTS, or
// outbox-admin-page in the system's temporary directory, kept after the
// test and overwritten by the next run.
func artifactDir(t *testing.T) string {
	t.Helper()
	d := os.Getenv("OUTBOX_ARTIFACTS")
	if d == "" {
		d = filepath.Join(os.TempDir(), "outbox-admin-page")
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// gate is the in-process destination: it rejects, permanently, the topics
// it is told to until it is opened, and records what it accepted.
type gate struct {
	open      atomic.Bool
	mu        sync.Mutex
	delivered map[string]int
}

func (g *gate) publish(_ context.Context, env *outbox.Envelope) error {
	if !g.open.Load() {
		switch env.Topic {
		case "payment.failed":
			return publisher.Permanent(errors.New("card processor rejected the charge: card declined (code 51)"))
		case "order.note":
			return publisher.Permanent(errors.New(`rejected <img src=x onerror="window.__xss=3"> by the destination`))
		}
	}
	g.mu.Lock()
	g.delivered[env.ID]++
	g.mu.Unlock()
	return nil
}

func (g *gate) deliveries(id string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.delivered[id]
}

// xssPayload would run script if the page ever parsed data as HTML.
const xssPayload = `{"note":"<script>window.__xss=1</script><img src=x onerror=\"window.__xss=2\">"}`

// TestBrowserPage drives the operator page in headless Chromium against a
// real relay and PostgreSQL: sign-in (a wrong token first), counts, search,
// a dead letter's detail, requeue with confirmation until the relay
// delivers it, a bulk discard after its dry run, escaping of hostile data,
// and the audit log.
func TestBrowserPage(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping in -short mode: needs PostgreSQL and Chromium")
	}
	chrome := testserver.Chromium(t)
	db := testdb.New(t, store.Postgres)

	g := &gate{delivered: map[string]int{}}
	var sent atomic.Int64
	cfg := relaytest.Config(outbox.PublisherFunc(g.publish))
	cfg.OnBatch = func(b outbox.BatchReport) { sent.Add(int64(b.Sent)) }
	relaytest.Start(t, db, cfg)

	producer, err := outbox.NewProducer(db.PGX, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ids []string
	err = db.PGX.InTx(ctx, func(tx pgx.Tx) error {
		for _, m := range []outbox.Message{
			{Topic: "order.created", Key: "order-1", Payload: []byte(`{"order_id":1}`)},
			{Topic: "order.created", Key: "order-2", Payload: []byte(`{"order_id":2}`)},
			{Topic: "order.created", Key: "order-3", Payload: []byte(`{"order_id":3}`)},
			{Topic: "payment.failed", Key: "pay-7", Payload: []byte(`{"payment_id":7,"amount":"12.50"}`),
				Headers: map[string]string{"x-tenant": "acme"}},
			{Topic: "order.note", Key: "xss", Payload: []byte(xssPayload)},
		} {
			id, err := producer.Enqueue(ctx, tx, m)
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	order2, payment, xss := ids[1], ids[3], ids[4]
	relaytest.WaitFor(t, 20*time.Second, "3 sent and 2 dead messages", func() bool {
		return relaytest.Count(t, db, "sent") == 3 && relaytest.Count(t, db, "dead") == 2
	})
	g.open.Store(true) // from now on the destination accepts everything

	const token = "page-test-token-5f1c"
	h, err := admin.New(db.PGX, &admin.Config{
		Tokens:          []admin.Token{{Name: "ops", Secret: token}},
		Delivered:       sent.Load,
		HistoryInterval: 100 * time.Millisecond,
		Logger:          relaytest.Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	sampling, stopSampling := context.WithCancel(ctx)
	sampled := make(chan error, 1)
	go func() { sampled <- h.Run(sampling) }()
	defer func() {
		stopSampling()
		if err := <-sampled; err != nil {
			t.Errorf("admin Run: %v", err)
		}
	}()
	srv := httptest.NewServer(h)
	defer srv.Close()

	var browserLog syncbuf.Buffer // written by the process's copier while the test reads it
	actx, cancel := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		// The sandbox needs user namespaces or a setuid helper that
		// containers and root often lack; the page under test is our own.
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
		chromedp.CombinedOutput(&browserLog),
	)...)
	defer cancel()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	bctx, cancel = context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	defer func() {
		if out := browserLog.String(); t.Failed() && out != "" {
			t.Logf("browser output:\n%s", testserver.ChromiumLog(out, 30))
		}
	}()

	// Every uncaught exception of the page fails the test.
	var exceptions sync.Map
	exc := chromedp.Events(bctx, runtime.ExceptionThrown)
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start %s: %v", chrome, err)
	}
	go func() {
		for ev, err := range exc {
			if err != nil {
				return
			}
			exceptions.Store(ev.ExceptionDetails.Text+" "+exceptionText(ev), true)
		}
	}()
	defer func() {
		exceptions.Range(func(k, _ any) bool {
			t.Errorf("page threw: %v", k)
			return true
		})
	}()

	dir := artifactDir(t)
	shot := func(name string) {
		t.Helper()
		buf, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		p := filepath.Join(dir, name+".png")
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			shot("failed")
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	// until waits for a JavaScript condition, failing with what it waited
	// for and what the page showed at that moment.
	until := func(what, cond, show string) {
		t.Helper()
		untilPage(t, bctx, what, cond, show, func() { shot("failed") })
	}
	rows := func(table string) string {
		return `JSON.stringify([...document.querySelectorAll('` + table + ` tbody tr')].map(tr => [...tr.cells].map(c => c.textContent)))`
	}

	// A wrong token is refused with a message, and the right one is taken.
	do("open the page",
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("token-input")),
		chromedp.SendKeys(chromedp.ID("token-input"), "not-the-token"),
		chromedp.Click(chromedp.ID("token-submit")),
		chromedp.WaitVisible(chromedp.ID("login-error")),
	)
	if msg := text("#login-error"); !strings.Contains(msg, "refused") || !strings.Contains(msg, "401") {
		t.Errorf("wrong token: message %q, want it to say the token was refused (401)", msg)
	}
	do("sign in",
		chromedp.SendKeys(chromedp.ID("token-input"), token),
		chromedp.Click(chromedp.ID("token-submit")),
		chromedp.WaitVisible(chromedp.ID("view-overview")),
	)

	// Overview: the counts and the topic table match the database.
	until("the counts", `document.getElementById('count-sent').textContent === '3' &&
		document.getElementById('count-dead').textContent === '2' &&
		document.getElementById('count-pending').textContent === '0'`,
		`['pending','sent','consumed','dead'].map(s => s + '=' + document.getElementById('count-' + s).textContent).join(' ')`)
	until("the topic table", `(() => {
		const r = document.querySelector('#topics-table tr[data-topic="payment.failed"] td[data-status="dead"]');
		const o = document.querySelector('#topics-table tr[data-topic="order.created"] td[data-status="sent"]');
		return r && r.textContent === '1' && o && o.textContent === '3';
	})()`, rows("#topics-table"))
	until("both charts drawn from the history", `document.querySelectorAll('#chart-throughput path.line, #chart-backlog path.line').length >= 2 &&
		document.getElementById('backlog-now').textContent === 'now 0'`,
		`document.getElementById('chart-throughput').outerHTML + document.getElementById('chart-backlog').outerHTML`)
	if sessionToken, err := chromedp.Run(bctx, chromedp.Evaluate[string](`sessionStorage.getItem('outbox-admin-token') || ''`)); err != nil || sessionToken != token {
		t.Errorf("token in sessionStorage: %v (err %v)", sessionToken != "", err)
	}
	shot("overview")

	// Search by topic and key finds exactly that message.
	do("search by topic and key",
		chromedp.Navigate(srv.URL+"/#search"),
		chromedp.WaitVisible(chromedp.ID("search-form")),
		chromedp.SendKeys(chromedp.ID("search-topic"), "order.created"),
		chromedp.SendKeys(chromedp.ID("search-key"), "order-2"),
		chromedp.Click(chromedp.ID("search-submit")),
	)
	until("one search result, order-2, sent", `(() => {
		const r = [...document.querySelectorAll('#search-table tbody tr')];
		return r.length === 1 && r[0].dataset.messageId === '`+order2+`' &&
			r[0].cells[1].textContent === 'order.created' && r[0].cells[2].textContent === 'order-2' &&
			r[0].cells[3].textContent === 'sent';
	})()`, rows("#search-table"))
	do("search by topic",
		chromedp.Evaluate[chromedp.Void](`document.getElementById('search-key').value = ''`),
		chromedp.Click(chromedp.ID("search-submit")),
	)
	until("the three order.created messages", `(() => {
		const r = [...document.querySelectorAll('#search-table tbody tr')];
		return r.length === 3 && r.every(tr => tr.cells[1].textContent === 'order.created');
	})()`, rows("#search-table"))

	// Dead letters: hostile payloads and errors are shown as text.
	do("open the dead letters", chromedp.Navigate(srv.URL+"/#dead"))
	until("two dead letters", `document.querySelectorAll('#dead-table tbody tr').length === 2`, rows("#dead-table"))
	until("the hostile payload and error as text", `(() => {
		const tr = document.querySelector('#dead-table tr[data-message-id="`+xss+`"]');
		return tr && tr.querySelector('.payload-preview').textContent.includes('<script>window.__xss=1</script>') &&
			tr.querySelector('.last-error').textContent.includes('<img src=x onerror=');
	})()`, rows("#dead-table"))
	do("open the hostile message",
		clickRow(`#dead-table`, xss),
		chromedp.WaitVisible(chromedp.ID("detail")),
	)
	until("the hostile payload in the detail", `document.getElementById('detail-payload').textContent.includes('"note": "<script>window.__xss=1</script><img src=x onerror=')`,
		`document.getElementById('detail-payload').textContent`)
	injected, err := chromedp.Run(bctx, chromedp.Evaluate[string](`[
		window.__xss === undefined ? '' : 'window.__xss=' + window.__xss,
		document.querySelectorAll('main img, main script, dialog img, dialog script, #notice *').length ? 'elements injected' : '',
		document.getElementById('detail-payload').children.length ? 'payload has child elements' : ''
	].filter(Boolean).join('; ')`))
	if err != nil || injected != "" {
		t.Errorf("hostile data was interpreted as HTML: %q (err %v)", injected, err)
	}
	do("close the detail", chromedp.Click(chromedp.ID("detail-close")), chromedp.WaitNotVisible(chromedp.ID("detail")))

	// A dead letter's detail shows its error; requeued, the relay delivers it.
	do("open the dead payment",
		clickRow(`#dead-table`, payment),
		chromedp.WaitVisible(chromedp.ID("detail")),
	)
	until("the payment's last error and headers", `document.getElementById('detail-last-error').textContent.includes('card declined (code 51)') &&
		document.getElementById('detail-headers').textContent.includes('acme') &&
		document.querySelector('#detail-status').dataset.status === 'dead'`,
		`document.getElementById('detail').textContent`)
	shot("dead-letter")
	do("requeue", chromedp.Click(chromedp.ID("detail-requeue")), chromedp.WaitVisible(chromedp.ID("confirm")))
	if q := text("#confirm-text"); !strings.Contains(q, "Requeue") {
		t.Errorf("confirmation asks %q", q)
	}
	if n := relaytest.Count(t, db, "dead"); n != 2 {
		t.Fatalf("before confirming, %d dead messages, want 2", n)
	}
	do("confirm", chromedp.Click(chromedp.ID("confirm-ok")), chromedp.WaitNotVisible(chromedp.ID("confirm")))
	until("the page to show the payment sent", `document.querySelector('#detail-status').dataset.status === 'sent'`,
		`document.getElementById('detail-fields').textContent + ' ' + document.getElementById('notice').textContent`)
	var status string
	var attempts int
	if err := db.Pool.QueryRow(ctx, "SELECT status, attempts FROM outbox_messages WHERE message_id = $1", payment).Scan(&status, &attempts); err != nil {
		t.Fatal(err)
	}
	if status != "sent" || g.deliveries(payment) != 1 {
		t.Errorf("after requeue: status %s, delivered %d times; want sent, delivered once", status, g.deliveries(payment))
	}
	// Sent, it can be replayed: delivered again, with the same message id.
	do("replay", chromedp.WaitEnabled(chromedp.ID("detail-replay")), chromedp.Click(chromedp.ID("detail-replay")), chromedp.WaitVisible(chromedp.ID("confirm")))
	if q := text("#confirm-text"); !strings.Contains(q, "same message id") {
		t.Errorf("replay confirmation asks %q", q)
	}
	do("confirm the replay", chromedp.Click(chromedp.ID("confirm-ok")), chromedp.WaitNotVisible(chromedp.ID("confirm")))
	relaytest.WaitFor(t, 30*time.Second, "the replayed payment delivered again", func() bool { return g.deliveries(payment) == 2 })
	// The audit row is written after the change, so the delivery may come
	// first.
	relaytest.WaitFor(t, 10*time.Second, "the replay in the audit log", func() bool {
		es, err := db.Store().Audit(ctx, 1)
		return err == nil && len(es) == 1 && es[0].Action == "replay" && es[0].Count == 1 && es[0].Actor == "ops"
	})
	do("close the detail", chromedp.Click(chromedp.ID("detail-close")), chromedp.WaitNotVisible(chromedp.ID("detail")))

	// Search by message id shows it sent; a time range before it finds nothing.
	do("search by message id",
		chromedp.Navigate(srv.URL+"/#search"),
		chromedp.WaitVisible(chromedp.ID("search-form")),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('search-form').reset()`),
		chromedp.SendKeys(chromedp.ID("search-id"), payment),
		chromedp.Click(chromedp.ID("search-submit")),
	)
	until("the requeued payment, sent, found by id", `(() => {
		const r = [...document.querySelectorAll('#search-table tbody tr')];
		return r.length === 1 && r[0].dataset.messageId === '`+payment+`' && r[0].cells[3].textContent === 'sent';
	})()`, rows("#search-table"))
	do("search before it was created",
		chromedp.Evaluate[chromedp.Void](`document.getElementById('search-until').value = '2001-01-01T00:00:00'`),
		chromedp.Click(chromedp.ID("search-submit")),
	)
	until("no result", `document.querySelectorAll('#search-table tbody tr').length === 0 &&
		!document.getElementById('search-empty').hidden`, rows("#search-table"))

	// Replay matching: the three sent orders, after a dry run and a
	// confirmation, are delivered again with their ids.
	do("replay the sent orders",
		chromedp.Evaluate[chromedp.Void](`document.getElementById('search-form').reset()`),
		chromedp.SendKeys(chromedp.ID("search-topic"), "order.created"),
		chromedp.Click(chromedp.ID("search-replay")),
		chromedp.WaitVisible(chromedp.ID("confirm")),
	)
	if q := text("#confirm-text"); !strings.HasPrefix(q, "3 delivered messages will be delivered again") {
		t.Errorf("replay confirmation says %q", q)
	}
	if n := relaytest.Count(t, db, "pending"); n != 0 {
		t.Errorf("the replay's dry run left %d pending", n)
	}
	do("confirm the replay of the orders", chromedp.Click(chromedp.ID("confirm-ok")), chromedp.WaitNotVisible(chromedp.ID("confirm")))
	relaytest.WaitFor(t, 30*time.Second, "the orders delivered again", func() bool {
		return g.deliveries(ids[0]) == 2 && g.deliveries(ids[1]) == 2 && g.deliveries(ids[2]) == 2
	})

	// Bulk discard by topic: a dry run first, then the confirmed change.
	do("filter the dead letters",
		chromedp.Navigate(srv.URL+"/#dead"),
		chromedp.WaitVisible(chromedp.ID("dead-form")),
		chromedp.SendKeys(chromedp.ID("dead-topic"), "order.note"),
		chromedp.Click(chromedp.ID("dead-apply")),
	)
	until("one dead letter left", `(() => {
		const r = document.querySelectorAll('#dead-table tbody tr');
		return r.length === 1 && r[0].dataset.messageId === '`+xss+`';
	})()`, rows("#dead-table"))
	do("discard all matching", chromedp.Click(chromedp.ID("dead-discard-all")), chromedp.WaitVisible(chromedp.ID("confirm")))
	if q := text("#confirm-text"); !strings.HasPrefix(q, "1 message will be discarded") {
		t.Errorf("bulk confirmation says %q, want it to start with %q", q, "1 message will be discarded")
	}
	if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE message_id = $1", xss); n != 1 {
		t.Fatalf("the dry run changed the database: %d rows left", n)
	}
	do("confirm the discard", chromedp.Click(chromedp.ID("confirm-ok")), chromedp.WaitNotVisible(chromedp.ID("confirm")))
	until("the list to empty", `document.querySelectorAll('#dead-table tbody tr').length === 0 &&
		document.getElementById('notice').textContent.startsWith('1 message discarded')`,
		rows("#dead-table")+` + ' ' + document.getElementById('notice').textContent`)
	if n := db.Count(t, "SELECT count(*) FROM outbox_messages WHERE message_id = $1", xss); n != 0 {
		t.Errorf("after the discard, %d rows of the message left", n)
	}

	// The audit log names who did what.
	do("open the audit log", chromedp.Navigate(srv.URL+"/#audit"))
	until("the requeue and the discard in the audit log", `(() => {
		const r = [...document.querySelectorAll('#audit-table tbody tr')].map(tr => [...tr.cells].map(c => c.textContent));
		return r.some(c => c[1] === 'ops' && c[2] === 'requeue' && c[3].includes('`+payment+`') && c[4] === '1') &&
			r.some(c => c[1] === 'ops' && c[2] === 'discard' && c[3].includes('order.note') && c[4] === '1');
	})()`, rows("#audit-table"))
	shot("audit")

	// A server without tokens shows everything without asking and refuses
	// changes with its reason.
	readOnly, err := admin.New(db.PGX, &admin.Config{Logger: relaytest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	srvOpen := httptest.NewServer(readOnly)
	defer srvOpen.Close()
	do("open the read-only page", chromedp.Navigate(srvOpen.URL+"/#search"), chromedp.WaitVisible(chromedp.ID("view-search")))
	if hidden, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.getElementById('login').hidden`)); err != nil || !hidden {
		t.Errorf("the page asked for a token on a server without tokens (err %v)", err)
	}
	do("open the sent payment",
		chromedp.SendKeys(chromedp.ID("search-id"), payment),
		chromedp.Click(chromedp.ID("search-submit")),
		chromedp.WaitVisible(chromedp.CSS(`#search-table tr[data-message-id="`+payment+`"]`)),
		clickRow(`#search-table`, payment),
		chromedp.WaitVisible(chromedp.ID("detail")),
		chromedp.WaitEnabled(chromedp.ID("detail-consumed")),
		chromedp.Click(chromedp.ID("detail-consumed")),
		chromedp.WaitVisible(chromedp.ID("confirm")),
		chromedp.Click(chromedp.ID("confirm-ok")),
	)
	until("the refusal", `(() => {
		const n = document.getElementById('notice');
		return !n.hidden && n.textContent.includes('403') && n.textContent.includes('no admin token is configured');
	})()`, `document.getElementById('notice').textContent`)
	if err := db.Pool.QueryRow(ctx, "SELECT status FROM outbox_messages WHERE message_id = $1", payment).Scan(&status); err != nil || status != "sent" {
		t.Errorf("after a refused change the message is %s (err %v), want sent", status, err)
	}
}

// clickRow clicks the row of message id in table (a CSS id selector) in
// the page's own script: the page redraws its tables on refresh, and a row
// located first and clicked after could be a detached node by then.
func clickRow(table, id string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](`document.querySelector(` + strconv.Quote(table+` tr[data-message-id="`+id+`"]`) + `).click()`)
}

func exceptionText(ev runtime.EventExceptionThrown) string {
	d := ev.ExceptionDetails
	if d.Exception != nil && d.Exception.Description != "" {
		return d.Exception.Description
	}
	return fmt.Sprintf("at %s:%d:%d", d.URL, d.LineNumber, d.ColumnNumber)
}
