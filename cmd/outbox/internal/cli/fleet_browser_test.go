package cli

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/txoutbox/outbox/internal/syncbuf"
	"github.com/txoutbox/outbox/internal/testkit/testserver"
)

// TestBrowserFleetDatabasePick drives the admin page of a relay over two
// databases in headless Chromium: / leads to the first database's page,
// whose selector lists both with the current one chosen; choosing the
// other loads that database's page, with its own counts and the selector
// following it.
func TestBrowserFleetDatabasePick(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping in -short mode: needs Chromium")
	}
	chrome := testserver.Chromium(t)
	f := startFleetAdmin(t, "pick", 2)
	addr, stderr, stop := f.addr, f.stderr, f.stop
	defer func() {
		if code := stop(); code != 0 {
			t.Errorf("relay exited %d\n%s", code, stderr)
		}
	}()
	base := "http://" + addr

	var browserLog syncbuf.Buffer
	actx, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.CombinedOutput(&browserLog))...)
	defer cancel()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	bctx, cancel = context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	// until waits for the JavaScript condition cond, failing with what
	// show evaluates to when it does not come true.
	until := func(what, cond, show string) {
		t.Helper()
		_, err := chromedp.Run(bctx, chromedp.Poll[chromedp.Void](cond,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second)))
		if err != nil {
			got, _ := chromedp.Run(bctx, chromedp.Evaluate[string](show))
			t.Fatalf("waiting for %s: %v; the page shows %q\nbrowser output: %s", what, err, got, testserver.ChromiumLog(browserLog.String(), 20))
		}
	}
	const picked = `JSON.stringify({path: location.pathname, hidden: document.getElementById('database-pick').hidden,
		options: [...document.getElementById('database').options].map(o => o.value), value: document.getElementById('database').value,
		pending: document.getElementById('count-pending').textContent})`

	// Navigate returns once the page has loaded, after the redirect.
	if resp, err := chromedp.RunResponse(bctx, chromedp.Navigate(base+"/")); err != nil || resp.Status != 200 {
		t.Fatalf("open the page: %v (%+v)\nbrowser output: %s", err, resp, testserver.ChromiumLog(browserLog.String(), 20))
	}
	until("the first database's page with the selector on it", `location.pathname === '/db/pick-a/' &&
		!document.getElementById('database-pick').hidden &&
		[...document.getElementById('database').options].map(o => o.value).join() === 'pick-a,pick-b' &&
		document.getElementById('database').value === 'pick-a' &&
		document.getElementById('count-pending').textContent === '1'`, picked)

	// Choosing another database navigates: the change is dispatched
	// after the evaluation returns, and RunResponse waits for the new
	// document to load, so nothing is evaluated in the page being left.
	resp, err := chromedp.RunResponse(bctx, chromedp.Evaluate[chromedp.Void](`(() => {
		const sel = document.getElementById('database');
		sel.value = 'pick-b';
		setTimeout(() => sel.dispatchEvent(new Event('change')), 0);
		return true;
	})()`))
	if err != nil || resp.Status != 200 {
		t.Fatalf("choose pick-b: %v (%+v)\nbrowser output: %s", err, resp, testserver.ChromiumLog(browserLog.String(), 20))
	}
	until("pick-b's page, its counts and the selector on pick-b", `location.pathname === '/db/pick-b/' &&
		!document.getElementById('database-pick').hidden &&
		document.getElementById('database').value === 'pick-b' &&
		document.getElementById('count-pending').textContent === '2'`, picked)
}
