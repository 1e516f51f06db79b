// Package browsertest tests the operator page of package
// fairlock/fairlockhttp in a real browser: headless Chromium, driven from Go
// with chromedp, on a real Redis. It is a module of its own so that the
// core module does not depend on chromedp.
//
// Chromium is Debian's (.ci/chromium installs it); CHROMIUM names another
// binary. Without one the test skips, or fails when
// FAIRLOCK_REQUIRE_BROWSER is set, as CI sets it. Its screenshots go to a
// temporary folder, or, with
//
//	go test -args -screenshots
//
// to docs/img, where docs/operations.md shows them.
package browsertest
