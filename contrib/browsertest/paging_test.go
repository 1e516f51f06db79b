package browsertest

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/fairlock/fairlockhttp"
	"github.com/fairlock/fairlock/internal/redistest"
)

// With 1,000 locks in use the page shows the first 20 and pages the rest;
// how long it takes, from the navigation to the locks drawn, is logged.
func TestThousandLocks(t *testing.T) {
	srv := redistest.Start(t)
	l, take := newLocker(t, srv), taker(t)
	for i := range 1000 {
		take(l.TryAcquire(t.Context(), fmt.Sprintf("job:%04d", i), fairlock.WithMetadata("worker")))
	}
	web := httptest.NewServer(fairlockhttp.New(newLocker(t, srv)))
	defer web.Close()
	tb := newTab(t)
	tb.do(chromedp.Navigate(web.URL + "/"))
	shown, err := chromedp.Run(tb.ctx, chromedp.Poll[float64](`document.getElementById('pageinfo').textContent === 'page 1 of 50' &&
  document.querySelectorAll('section.lock').length === 20 && performance.now()`, chromedp.WithPollingTimeout(10*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("1,000 locks in use: the first page of 20 drawn %.0f ms after the navigation started", shown)
	tb.click("#next")
	tb.await("the next page", `document.getElementById('pageinfo').textContent + ': ' + document.querySelector('section.lock').dataset.name`,
		"page 2 of 50: job:0020")
	tb.do(chromedp.SendKeys(chromedp.ID("filter"), "job:09"))
	tb.await("a filter", `document.getElementById('pageinfo').textContent + ', ' + document.getElementById('status').textContent.split(' · ')[0]`,
		"page 1 of 5, 1,000 locks in use, 100 matching")
}
