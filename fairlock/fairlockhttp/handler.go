// Package fairlockhttp serves a page for operators: the locks in use, of
// every kind, who holds each one (token, metadata, fence, lease left,
// group and weight, priority) and who waits behind it, in order, with how
// long each has waited; groups' shares and priority lanes; updated live.
// A service mounts it as it mounts net/http/pprof:
//
//	mux.Handle("/debug/fairlock/", http.StripPrefix("/debug/fairlock", fairlockhttp.New(locker)))
//
// The page links to what it serves with relative addresses, so it works
// under any path that ends with a slash, with or without StripPrefix. It
// reads with Locker.Locks and Locker.Inspect only, so it runs under the
// read-only ACL rule of docs/operations.md, unless it is built
// WithForceRelease. Put it behind whatever guards the service's other
// internal pages: it shows tokens and metadata.
//
// What it serves, relative to where it is mounted:
//
//	GET  ./            the page: HTML, CSS and a little JavaScript, embedded in
//	                   the binary; nothing is loaded from elsewhere
//	GET  ./locks.json  the locks in use, a page at a time (below)
//	POST ./release     a forced release, only WithForceRelease (below)
//
// locks.json takes page (from 1), per_page (1 to 200, 20 by default), q
// (only the names that contain it) and waiters (the most listed per lock,
// 1 to 1000, 25 by default); or kind and name, for that one lock, in use
// or not. It answers, with status 200, or 503 and error when Redis could
// not be read:
//
//	{"read_at", "refresh_ms", "force_release", "in_use" (locks in use), "matching" (those
//	 that match q), "page", "pages", "per_page", "locks": [LOCK...], "error" (only on failure)}
//	LOCK   = {"name", "kind", "capacity", "in_use", "fence", "queued", "holders": [HOLDER...],
//	          "waiters": [WAITER...], "groups": [GROUP...], "lanes": [LANE...]}
//	HOLDER = {"token", "lock", "permits", "fence", "ttl_ms", "metadata", "group", "weight", "priority",
//	          "multi"}
//	WAITER = {"token", "lock", "permits", "position", "ttl_ms", "waited_ms", "metadata", "group",
//	          "weight", "priority", "multi"}
//	GROUP  = {"group", "weight", "holders", "held", "waiting", "share", "fair_share"}
//	LANE   = {"priority", "holders", "waiting", "longest_wait_ms"}
//
// HOLDER and WAITER, and LOCK but for groups and lanes, are those of the
// fairlock command's list -json (waited_ms is fairlock.Waiter.Waited);
// arrays are [] when empty, never null; holders are in the order granted
// (by fence), waiters in queue order. A GROUP is one group of a
// semaphore's holders and listed waiters, by name: held is its permits
// held, share that over the capacity, fair_share its weight over the
// weights of the groups listed, which is the share of permit-time the
// groups' rule gives it while they all wait. A LANE is one
// priority, listed when any party has a priority above 0.
//
// release takes a form (kind, name, token: the holder to end, and
// confirm=yes) and the header X-Fairlock-Token, whose value the page
// carries; it answers {"ended": [token...], "granted": [{"token",
// "fence"}...]}, or an error with 403 (off, cross-site, wrong token), 400,
// 409 (that token holds the lock no longer) or 503.
package fairlockhttp

import (
	"crypto/rand"
	"embed"
	"encoding/hex"
	"html/template"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/fairlock/fairlock/fairlock"
)

// The bounds of the page's polling interval (WithRefresh).
const (
	MinRefresh     = 200 * time.Millisecond
	MaxRefresh     = time.Minute
	DefaultRefresh = time.Second
)

// readTimeout bounds each request's calls to Redis, so that a Redis that
// does not answer is a message on the page within seconds, not a page
// that waits as long as the browser does.
const readTimeout = 5 * time.Second

// A Handler serves the page; New makes one.
type Handler struct {
	locker  *fairlock.Locker
	refresh time.Duration
	force   bool
	token   string // the X-Fairlock-Token a release needs, WithForceRelease only
	origins *http.CrossOriginProtection
	list    lockList
}

// An Option configures a Handler.
type Option func(*Handler)

// WithForceRelease lets the page end a holder's lease
// (Locker.ForceRelease), after the operator confirms it in a dialog that
// says what it does. The request must come from the page itself: a POST
// from the same origin (http.CrossOriginProtection), carrying a token
// drawn for this Handler, which a page of another site cannot read. The
// Locker's ACL user then needs the writing rule.
func WithForceRelease() Option { return func(h *Handler) { h.force = true } }

// WithRefresh sets how often the page reads the locks again, between
// MinRefresh and MaxRefresh (a value out of range is brought to the
// nearest bound): DefaultRefresh, a second, without it. Each reading of a
// page costs one Inspect per lock shown; the scan of the locks in use is
// shared by every open page and runs at most once per interval.
func WithRefresh(d time.Duration) Option {
	return func(h *Handler) { h.refresh = min(max(d, MinRefresh), MaxRefresh) }
}

// New returns the page of the locks that locker sees (its key prefix, on
// every primary of a Cluster). locker must not be nil.
func New(locker *fairlock.Locker, opts ...Option) *Handler {
	h := &Handler{locker: locker, refresh: DefaultRefresh, origins: http.NewCrossOriginProtection()}
	for _, o := range opts {
		o(h)
	}
	if h.force {
		h.token = newToken()
	}
	return h
}

// newToken draws a release token: 128 random bits.
func newToken() string {
	b := make([]byte, 16)
	rand.Read(b) //nolint:errcheck // never fails (crypto/rand's documentation)
	return hex.EncodeToString(b)
}

//go:embed page
var assets embed.FS

var pageTemplate = template.Must(template.ParseFS(assets, "page/index.html"))

// ServeHTTP serves the page, its assets, locks.json and release, by the
// last element of the request's path.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch name := path.Base(p); {
	case p == "" || strings.HasSuffix(p, "/"):
		h.servePage(w, r)
	case name == "locks.json":
		h.serveLocks(w, r)
	case name == "release":
		h.serveRelease(w, r)
	case name == "page.css" || name == "page.js":
		serveAsset(w, r, name)
	default:
		http.NotFound(w, r)
	}
}

// securityHeaders keep the page from loading anything from elsewhere and
// from being framed by another site (which could trick a click on its
// force release).
func securityHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Cache-Control", "no-store")
}

// onlyReading answers 405 to a request that is not a GET or HEAD.
func onlyReading(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return false
	}
	w.Header().Set("Allow", "GET, HEAD")
	http.Error(w, "method not allowed: this address is read with GET", http.StatusMethodNotAllowed)
	return true
}

func (h *Handler) servePage(w http.ResponseWriter, r *http.Request) {
	if onlyReading(w, r) {
		return
	}
	securityHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	pageTemplate.Execute(w, struct { //nolint:errcheck // a failed write is the client's going away
		Token     string
		RefreshMs int64
	}{h.token, h.refresh.Milliseconds()})
}

func serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	if onlyReading(w, r) {
		return
	}
	b, err := assets.ReadFile("page/" + name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	securityHeaders(w)
	w.Header().Set("Cache-Control", "no-cache")
	if strings.HasSuffix(name, ".css") {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	}
	w.Write(b) //nolint:errcheck // a failed write is the client's going away
}
