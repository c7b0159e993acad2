package admin_test

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/txoutbox/outbox/internal/store"
	"github.com/txoutbox/outbox/internal/testkit/adopttest"
	"github.com/txoutbox/outbox/internal/testkit/relaytest"
	"github.com/txoutbox/outbox/internal/testkit/testdb"
)

// TestBrowserAdoptedPage drives the page in headless Chromium over an
// adopted Spring table on PostgreSQL: the overview names the table and
// counts its own status values, a dead row's detail shows its own status
// and offers Requeue only, the bulk buttons are hidden, and the requeue
// moves the row back to PENDING.
func TestBrowserAdoptedPage(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping in -short mode: needs PostgreSQL and Chromium")
	}
	db := testdb.New(t, store.Postgres)
	adopttest.Create(t, db, "spring")
	db.Exec(t, "INSERT INTO t_local_message (message_id, topic, tag, business_key, payload, status, retry_count, max_retry, error_msg) VALUES ('m-dead', 'user-register', 'sync-crm', 'user-1', '{}', 'FAILED', 10, 10, 'crm said no'), ('m-sent', 'user-register', 'sync-crm', 'user-2', '{}', 'SENT', 0, 10, NULL)")
	srv := newAdoptedAdmin(t, db, "spring")
	pg := openPage(t, srv.URL)

	pg.signIn(opsToken)
	pg.do("the table card", chromedp.WaitVisible(chromedp.ID("table-card")))
	pg.until("the table and its status values", `document.getElementById('table-name').textContent === 't_local_message (profile spring)' &&
		JSON.stringify([...document.querySelectorAll('#table-states tbody tr')].map(tr => tr.dataset.state + '=' + tr.cells[1].textContent)) === '["FAILED=1","SENT=1"]' &&
		document.getElementById('count-dead').textContent === '1'`,
		`document.getElementById('table-card').textContent + ' dead=' + document.getElementById('count-dead').textContent`)

	pg.do("open the dead letters", chromedp.Navigate(srv.URL+"/#dead"))
	pg.until("one dead row", `document.querySelectorAll('#dead-table tbody tr').length === 1`, `document.getElementById('dead-table').textContent`)
	pg.until("no bulk changes", `document.getElementById('dead-requeue-all').hidden && document.getElementById('dead-discard-all').hidden && document.getElementById('search-replay').hidden`,
		`document.getElementById('view-dead').innerHTML`)
	pg.do("open the dead row", clickRow("#dead-table", "m-dead"), chromedp.WaitVisible(chromedp.ID("detail")))
	pg.until("the detail offers Requeue only", `document.getElementById('detail-table-status').textContent === 'FAILED' &&
		!document.getElementById('detail-requeue').disabled &&
		['detail-discard', 'detail-consumed', 'detail-replay'].every(id => document.getElementById(id).hidden)`,
		`document.getElementById('detail').innerHTML`)
	pg.do("requeue", chromedp.Click(chromedp.ID("detail-requeue")), chromedp.WaitVisible(chromedp.ID("confirm")),
		chromedp.Click(chromedp.ID("confirm-ok")), chromedp.WaitNotVisible(chromedp.ID("confirm")))
	relaytest.WaitFor(t, 20*time.Second, "the requeued row PENDING with its retries reset", func() bool {
		return db.Count(t, "SELECT count(*) FROM t_local_message WHERE message_id = 'm-dead' AND status = 'PENDING' AND retry_count = 0") == 1
	})
}

// untilPage waits for the JavaScript condition cond in the page of bctx;
// when it does not come true it calls failed, then fails the test with
// what it waited for and what show evaluates to.
func untilPage(t *testing.T, bctx context.Context, what, cond, show string, failed func()) {
	t.Helper()
	_, err := chromedp.Run(bctx, chromedp.Poll[chromedp.Void](cond,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil {
		got, _ := chromedp.Run(bctx, chromedp.Evaluate[string](show))
		failed()
		t.Fatalf("waiting for %s: %v; the page shows %q", what, err, got)
	}
}
