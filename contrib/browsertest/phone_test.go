package browsertest

import (
	"fmt"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
)

// phone: at a phone's width (390 CSS pixels) nothing is wider than the
// screen, and the confirmation of a release fits on it. The screenshots
// show the mutex alone, found with the filter, as a phone's screen does.
func phone(tb *tab, s *scene) {
	tb.t.Helper()
	tb.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Navigate(s.url))
	tb.await("at a phone's width", rowsOf("invoice:42"), rows{[]string{"billing-2c1d pid 388"}, []string{"retry worker 3", "late job"}})
	tb.await("at a phone's width, what is wider than the screen", overflow, []string{})
	tb.do(chromedp.SendKeys(chromedp.ID("filter"), "invoice"))
	tb.await("the filter", `[...document.querySelectorAll('section.lock')].map((s) => s.dataset.name)`, []string{"invoice:42"})
	tb.shot("page-phone", false)
	tb.click(in("invoice:42", "table.holders button.danger"))
	tb.await("the confirmation at a phone's width, what is wider than the screen", overflow, []string{})
	tb.shot("page-confirm", false)
	tb.click("#confirm-cancel")
}

// overflow is the JavaScript that lists what is wider than the screen:
// the document, if it scrolls sideways, and each element that reaches past
// the screen's right edge.
const overflow = `(() => {
  const out = [];
  const width = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth > width) out.push('the document: ' + document.documentElement.scrollWidth + 'px');
  for (const e of document.querySelectorAll('body *')) {
    const r = e.getBoundingClientRect();
    if (r.width > 0 && r.right > width + 0.5) out.push(e.tagName.toLowerCase() + '.' + e.className + ': ' + Math.round(r.right) + 'px');
  }
  return out.slice(0, 10);
})()`

// banner is the JavaScript that says "ok" when the page's banner is
// shown, or hidden, as want says, else what the banner says.
func banner(shown bool) string {
	return fmt.Sprintf(`(() => {
  const b = document.getElementById('banner');
  return b.hidden !== %t ? 'ok' : (b.hidden ? '(no banner)' : b.textContent);
})()`, shown)
}

// redisDown: a Redis that stops is a message on the page, which goes once
// Redis is back.
func redisDown(tb *tab, s *scene) {
	tb.t.Helper()
	s.redis.Kill()
	start := time.Now()
	tb.await("Redis stopped", banner(true), "ok")
	tb.t.Logf("Redis stopped: the page says so %v later", time.Since(start).Round(10*time.Millisecond))
	var said string
	tb.eval(`document.getElementById('banner').textContent`, &said)
	if want := "cannot connect to Redis at " + s.redis.Addr; !strings.Contains(said, want) {
		tb.t.Errorf("the banner says %q, want %q in it", said, want)
	}
	tb.shot("page-down", false)
	// Back empty (the test's Redis keeps nothing on disk); the Lockers
	// write again what they still hold and wait for (which, after a
	// restart that lost every key, is theirs to say, not the page's).
	s.redis.Restart(tb.t)
	tb.await("Redis back", banner(false), "ok")
	tb.await("Redis back, the lock as its Lockers wrote it again",
		`document.querySelectorAll(`+jsString(in("invoice:42", "table.holders tbody tr"))+`).length`, 1)
}
