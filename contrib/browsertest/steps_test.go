package browsertest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/fairlock/fairlock/fairlock"
)

// The page in a browser, a step at a time on one scene: what it shows, a
// waiter that joins, a grant that moves the list, a forced release that
// needs its confirmation and that another site cannot send, a phone's
// width, and a Redis that stops and comes back.
func TestPage(t *testing.T) {
	s := newScene(t)
	tb := newTab(t)
	tb.do(chromedp.EmulateViewport(1000, 800), chromedp.Navigate(s.url))
	showsScene(tb)
	tb.shot("page-desktop", true)

	join(t, mutex(s.locker, "invoice:42"), fairlock.WithMetadata("late job"))
	tb.await("a waiter that joins", rowsOf("invoice:42"),
		rows{[]string{"billing-7f9c pid 4121"}, []string{"on-call fix", "billing-2c1d pid 388", "retry worker 3", "late job"}})
	if err := s.holder.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	tb.await("the holder releases: the priority waiter is granted", rowsOf("invoice:42"),
		rows{[]string{"on-call fix"}, []string{"billing-2c1d pid 388", "retry worker 3", "late job"}})
	var marked bool
	tb.eval(`!!document.querySelector(`+jsString(in("invoice:42", "table.holders tr.fresh"))+`)`, &marked)
	if !marked {
		t.Error("the new holder's row is not marked as new")
	}

	forceRelease(tb, s)
	crossSite(tb, s)
	phone(tb, s)
	redisDown(tb, s)
}

// showsScene checks the scene as the page first shows it.
func showsScene(tb *tab) {
	tb.t.Helper()
	tb.await("the mutex", rowsOf("invoice:42"),
		rows{[]string{"billing-7f9c pid 4121"}, []string{"on-call fix", "billing-2c1d pid 388", "retry worker 3"}})
	tb.await("the semaphore", rowsOf("exports"), rows{[]string{"export 981", "export 982"}, []string{"export 983"}})
	tb.await("the read-write lock", rowsOf("config"), rows{[]string{"reader api-1", "reader api-2"}, []string{"deploy 17"}})
	var shown struct {
		Names    []string `json:"names"`
		Priority string   `json:"priority"`
		Lanes    string   `json:"lanes"`
		Groups   string   `json:"groups"`
		Status   string   `json:"status"`
	}
	tb.eval(`({
  names: [...document.querySelectorAll('section.lock')].map((s) => s.dataset.kind + ' ' + s.dataset.name),
  priority: document.querySelector(`+jsString(in("invoice:42", "table.waiters td[data-label=Priority]"))+`).textContent,
  lanes: document.querySelector(`+jsString(in("invoice:42", ".lanes"))+`).textContent,
  groups: document.querySelector(`+jsString(in("exports", ".groups"))+`).textContent,
  status: document.getElementById('status').textContent,
})`, &shown)
	if want := []string{"rwmutex config", "semaphore exports", "mutex invoice:42"}; !slices.Equal(shown.Names, want) {
		tb.t.Errorf("locks shown: %q, want %q", shown.Names, want)
	}
	for _, c := range []struct{ what, got, want string }{
		{"the first waiter's priority", shown.Priority, "9"},
		{"the lanes", shown.Lanes, "priority 9: 0 holders, 1 waiting"},
		{"the groups", shown.Groups, "customer-7 ×3"},
		{"the groups", shown.Groups, "weight 3: 75% of the permit-time"},
		{"the status", shown.Status, "3 locks in use"},
	} {
		if !strings.Contains(c.got, c.want) {
			tb.t.Errorf("%s: %q, want %q in it", c.what, c.got, c.want)
		}
	}
}

// forceRelease: the button opens a confirmation that names the holder and
// the waiter granted next; cancelled, nothing changes; confirmed, the
// holder's lease ends and the next waiter is granted.
func forceRelease(tb *tab, s *scene) {
	tb.t.Helper()
	button := in("invoice:42", "table.holders button.danger")
	confirmation := `(() => { const d = document.getElementById('confirm'); return d.open ? d.textContent : ''; })()`
	var token string
	tb.eval(`document.querySelector(`+jsString(in("invoice:42", "table.holders tbody tr"))+`).dataset.token`, &token)
	tb.click(button)
	var asked string
	tb.eval(confirmation, &asked)
	for _, want := range []string{"End this lease?", token, `("on-call fix")`, `first `, `("billing-2c1d pid 388")`} {
		if !strings.Contains(asked, want) {
			tb.t.Errorf("the confirmation lacks %q: %q", want, asked)
		}
	}
	tb.click("#confirm-cancel")
	tb.await("the confirmation, cancelled", confirmation, "")
	time.Sleep(3 * refresh) // three readings more: nothing was sent
	if got := s.holderOf(tb.t, "invoice:42").Metadata; got != "on-call fix" || len(s.posts.take()) != 0 {
		tb.t.Fatalf("a cancelled release changed the holder to %q", got)
	}

	tb.click(button)
	tb.click("#confirm-end")
	tb.await("confirmed: the next waiter is granted", rowsOf("invoice:42"),
		rows{[]string{"billing-2c1d pid 388"}, []string{"retry worker 3", "late job"}})
	var toast string
	tb.eval(`document.getElementById('toast').textContent`, &toast)
	if !strings.HasPrefix(toast, "Ended ") || !strings.Contains(toast, "Granted ") {
		tb.t.Errorf("after the release the page says %q", toast)
	}
	if got := s.posts.take(); !slices.Equal(got, []string{"POST 200"}) {
		tb.t.Errorf("requests to release: %q, want one POST answered 200", got)
	}
}

// crossSite: a page of another site, even one that knew the release
// token, cannot end a lease. A form-like POST is refused by the
// same-origin check; a fetch carrying the token's header needs a CORS
// preflight, which the handler never grants, so the browser does not send
// it.
func crossSite(tb *tab, s *scene) {
	tb.t.Helper()
	var token string
	tb.eval(`document.querySelector('meta[name="fairlock-token"]').content`, &token)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "<!doctype html><title>another site</title><p>another site")
	}))
	defer other.Close()
	// localhost and 127.0.0.1 are two sites to the browser.
	tb.do(chromedp.Navigate(strings.Replace(other.URL, "127.0.0.1", "localhost", 1)))
	var got []string
	tb.eval(fmt.Sprintf(`(async () => {
  const form = () => new URLSearchParams({ kind: 'mutex', name: 'invoice:42', token: %s, confirm: 'yes' });
  const out = [];
  try { await fetch(%s, { method: 'POST', mode: 'no-cors', body: form() }); out.push('sent'); } catch { out.push('not sent'); }
  try { const r = await fetch(%[2]s, { method: 'POST', headers: { 'X-Fairlock-Token': %[3]s }, body: form() }); out.push('answered ' + r.status); }
  catch { out.push('refused by the browser'); }
  return out;
})()`, jsString(s.holderOf(tb.t, "invoice:42").Token), jsString(s.url+"release"), jsString(token)), &got)
	if want := []string{"sent", "refused by the browser"}; !slices.Equal(got, want) {
		tb.t.Errorf("the other site's requests: %q, want %q", got, want)
	}
	if got, want := s.posts.take(), []string{"POST 403", "OPTIONS 405"}; !slices.Equal(got, want) {
		tb.t.Errorf("what reached release from the other site: %q, want %q", got, want)
	}
	if got := s.holderOf(tb.t, "invoice:42").Metadata; got != "billing-2c1d pid 388" {
		tb.t.Errorf("the other site changed the holder to %q", got)
	}
}
