package browsertest

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/fairlock/fairlockhttp"
	"github.com/fairlock/fairlock/internal/redistest"
)

// A MultiMutex request waiting in two queues shows in each with the same
// label in a Multi column; a single request's cell is "–".
func TestMultiMutexColumn(t *testing.T) {
	srv := redistest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	a, b, take := newLocker(t, srv), newLocker(t, srv), taker(t)
	take(a.Acquire(ctx, "ledger:a"))
	take(a.Acquire(ctx, "ledger:b"))
	join(t, mutex(b, "ledger:b"))
	m, err := b.MultiMutex("ledger:a", "ledger:b")
	if err != nil {
		t.Fatal(err)
	}
	queued, ended := make(chan int, 2), make(chan struct{})
	t.Cleanup(func() { cancel(); <-ended })
	go func() {
		defer close(ended)
		m.Acquire(ctx, fairlock.OnQueued(func(p int) { queued <- p })) //nolint:errcheck // cancelled at the end
	}()
	for range 2 {
		select {
		case <-queued:
		case <-time.After(5 * time.Second):
			t.Fatal("the MultiMutex did not queue in both queues within 5 s")
		}
	}
	web := httptest.NewServer(fairlockhttp.New(newLocker(t, srv)))
	defer web.Close()
	tb := newTab(t)
	tb.do(chromedp.Navigate(web.URL + "/"))
	// Per lock: the waiters' head, then each waiter's Multi cell.
	const read = `(() => ['ledger:a', 'ledger:b'].map((name) => {
  const s = [...document.querySelectorAll('section.lock')].find((e) => e.dataset.name === name);
  if (!s) return null;
  const head = [...s.querySelectorAll('table.waiters th')].map((th) => th.textContent).join(',');
  const cells = [...s.querySelectorAll('table.waiters td[data-label=Multi]')].map((td) => td.textContent);
  return [head, ...cells];
}))()`
	var got [][]string
	tb.await("both queues drawn", `(`+read+`).every((l) => l !== null)`, true)
	tb.eval(read, &got)
	label := ""
	if len(got) == 2 && len(got[0]) == 2 {
		label = got[0][1]
	}
	want := [][]string{{"Place,Token,Waited,Multi,Metadata", label}, {"Place,Token,Waited,Multi,Metadata", "–", label}}
	if label == "" || label == "–" || len(got) != 2 || len(got[1]) != 3 || got[0][0] != want[0][0] || got[1][0] != want[1][0] || got[1][1] != "–" || got[1][2] != label {
		t.Errorf("the waiters' Multi columns: %q, want %q with one label", got, want)
	}
}
