package fairlockhttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/fairlock/fairlockhttp"
	"github.com/fairlock/fairlock/fairlock/fairlocktest"
	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// go-redis's pool, once it failed to dial, probes in a goroutine that
// sleeps a second between dials, and sees that its pool was closed only
// then.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

// A backend is a Redis to run a test on: miniredis, or a real redis-server.
type backend struct {
	name  string
	start func(t *testing.T) (client *redis.Client, stop func())
}

var backends = []backend{
	{"miniredis", func(t *testing.T) (*redis.Client, func()) {
		srv := fairlocktest.NewServer(t)
		return srv.Client(), func() { srv.Miniredis().Close() }
	}},
	{"redis", func(t *testing.T) (*redis.Client, func()) {
		srv := redistest.Start(t)
		return srv.Client(t), srv.Kill
	}},
}

// onEach runs test on each backend, side by side: each has its own
// server, and with Redis stopped a request waits out go-redis's retries.
func onEach(t *testing.T, test func(t *testing.T, client *redis.Client, stop func())) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			client, stop := b.start(t)
			test(t, client, stop)
		})
	}
}

func newLocker(t *testing.T, client *redis.Client) *fairlock.Locker {
	t.Helper()
	l, err := fairlock.New(client, fairlock.WithLeaseTTL(5*time.Second), fairlock.WithWaiterTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func withTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// queue starts acquire in a goroutine and returns once it waits in the
// queue; the lease, when granted, comes on the channel. The wait ends
// with the test.
func queue(t *testing.T, acquire func(ctx context.Context, opts ...fairlock.AcquireOption) (*fairlock.Lease, error),
	opts ...fairlock.AcquireOption) <-chan *fairlock.Lease {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	queued, granted, done := make(chan struct{}, 1), make(chan *fairlock.Lease, 1), make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		lease, err := acquire(ctx, append(opts, fairlock.OnQueued(func(int) { queued <- struct{}{} }))...)
		if err == nil {
			granted <- lease
		}
	}()
	select {
	case <-queued:
	case <-time.After(5 * time.Second):
		t.Fatal("not queued within 5s")
	}
	return granted
}

// scene is the page's usual picture: a mutex with a holder and three
// waiters, one of priority 9, and a semaphore shared by a group of weight
// 3 and one of weight 1, with a waiter.
type scene struct {
	client           *redis.Client
	holder           *fairlock.Lease
	first, rest, pri <-chan *fairlock.Lease
}

func makeScene(t *testing.T, client *redis.Client) scene {
	t.Helper()
	ctx := withTimeout(t, 10*time.Second)
	a, b := newLocker(t, client), newLocker(t, client)
	s := scene{client: client}
	var err error
	if s.holder, err = a.Acquire(ctx, "invoice:42", fairlock.WithMetadata("billing-7f9c pid 4121")); err != nil {
		t.Fatal(err)
	}
	mutex := func(l *fairlock.Locker) func(context.Context, ...fairlock.AcquireOption) (*fairlock.Lease, error) {
		return func(ctx context.Context, opts ...fairlock.AcquireOption) (*fairlock.Lease, error) {
			return l.Acquire(ctx, "invoice:42", opts...)
		}
	}
	s.first = queue(t, mutex(b), fairlock.WithMetadata("billing-2c1d pid 388"))
	s.rest = queue(t, mutex(a), fairlock.WithMetadata("retry worker 3"))
	s.pri = queue(t, mutex(b), fairlock.WithMetadata("on-call fix"), fairlock.WithPriority(9))
	semA, _ := a.Semaphore("exports", 3)
	semB, _ := b.Semaphore("exports", 3)
	if _, err := semA.Acquire(ctx, 2, fairlock.WithGroup("customer-7"), fairlock.WithGroupWeight(3), fairlock.WithMetadata("export 981")); err != nil {
		t.Fatal(err)
	}
	if _, err := semB.Acquire(ctx, 1, fairlock.WithGroup("customer-9"), fairlock.WithMetadata("export 982")); err != nil {
		t.Fatal(err)
	}
	queue(t, func(ctx context.Context, opts ...fairlock.AcquireOption) (*fairlock.Lease, error) {
		return semB.Acquire(ctx, 2, opts...)
	},
		fairlock.WithGroup("customer-9"), fairlock.WithMetadata("export 983"))
	return s
}

// onScene runs test on each backend, on the scene, with a server of the
// page built with opts; stop stops the backend.
func onScene(t *testing.T, opts []fairlockhttp.Option, test func(t *testing.T, s scene, srv *httptest.Server, stop func())) {
	onEach(t, func(t *testing.T, client *redis.Client, stop func()) {
		s := makeScene(t, client)
		srv := httptest.NewServer(fairlockhttp.New(newLocker(t, client), opts...))
		t.Cleanup(srv.Close)
		test(t, s, srv, stop)
	})
}

// get reads path from srv: the status and the body.
func get(t *testing.T, srv *httptest.Server, path string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, srv, req)
}

// do sends req to srv: the status and the body.
func do(t *testing.T, srv *httptest.Server, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// The JSON as the page reads it.
type page struct {
	InUse    int    `json:"in_use"`
	Matching int    `json:"matching"`
	Page     int    `json:"page"`
	Pages    int    `json:"pages"`
	PerPage  int    `json:"per_page"`
	Error    string `json:"error"`
	Locks    []struct {
		Name, Kind string
		Queued     int
		Holders    []struct {
			Token, Metadata, Group string
			Fence                  int64
			TTLMs                  int64 `json:"ttl_ms"`
			Weight, Priority       int
		}
		Waiters []struct {
			Token, Metadata, Group string
			Position, Permits      int
			WaitedMs               int64 `json:"waited_ms"`
			Priority               int
		}
		Groups []struct {
			Group            string
			Weight, Held     int
			Share            float64
			FairShare        float64 `json:"fair_share"`
			Holders, Waiting int
		}
		Lanes []struct{ Priority, Holders, Waiting int }
	}
}

func readPage(t *testing.T, srv *httptest.Server, query string) (int, page) {
	t.Helper()
	status, body := get(t, srv, "/locks.json"+query)
	var p page
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("locks.json%s: status %d, %v: %s", query, status, err, body)
	}
	return status, p
}

func TestLocksJSON(t *testing.T) {
	onScene(t, nil, func(t *testing.T, s scene, srv *httptest.Server, _ func()) {
		status, p := readPage(t, srv, "")
		if status != http.StatusOK || p.InUse != 2 || p.Matching != 2 || p.Page != 1 || p.Pages != 1 || len(p.Locks) != 2 || p.Error != "" {
			t.Fatalf("status %d, %+v", status, p)
		}
		sem, mu := p.Locks[0], p.Locks[1] // by name: exports, invoice:42
		if mu.Name != "invoice:42" || mu.Kind != "mutex" || len(mu.Holders) != 1 || mu.Holders[0].Token != s.holder.Token() ||
			mu.Holders[0].Metadata != "billing-7f9c pid 4121" || mu.Holders[0].TTLMs <= 0 || mu.Holders[0].Fence < s.holder.Fence() {
			t.Errorf("the mutex: %+v", mu)
		}
		var order []string
		for i, w := range mu.Waiters {
			order = append(order, w.Metadata)
			if w.Position != i+1 || w.WaitedMs < 0 || w.WaitedMs > 10_000 {
				t.Errorf("waiter %d: %+v", i, w)
			}
		}
		if got := strings.Join(order, ", "); got != "on-call fix, billing-2c1d pid 388, retry worker 3" || mu.Queued != 3 {
			t.Errorf("waiters in order: %s (%d queued); want the priority 9 first, then arrival order", got, mu.Queued)
		}
		if len(mu.Lanes) != 2 || mu.Lanes[0].Priority != 9 || mu.Lanes[0].Waiting != 1 || mu.Lanes[1].Waiting != 2 || mu.Lanes[1].Holders != 1 {
			t.Errorf("lanes: %+v", mu.Lanes)
		}
		if sem.Name != "exports" || sem.Kind != "semaphore" || len(sem.Holders) != 2 || len(sem.Waiters) != 1 || sem.Waiters[0].Permits != 2 {
			t.Errorf("the semaphore: %+v", sem)
		} else if sem.Holders[0].Metadata != "export 981" || sem.Holders[0].Fence > sem.Holders[1].Fence {
			t.Errorf("the semaphore's holders, not in the order granted: %+v", sem.Holders)
		}
		if g := sem.Groups; len(g) != 2 || g[0].Group != "customer-7" || g[0].Weight != 3 || g[0].Held != 2 || g[0].FairShare != 0.75 ||
			g[1].Group != "customer-9" || g[1].Held != 1 || g[1].Waiting != 1 || g[1].FairShare != 0.25 || len(sem.Lanes) != 0 {
			t.Errorf("groups %+v, lanes %+v", g, sem.Lanes)
		}
		checkShape(t, srv)
		// One lock asked for by kind and name; a waiter cap.
		if _, one := readPage(t, srv, "?kind=mutex&name=invoice:42&waiters=2"); len(one.Locks) != 1 || len(one.Locks[0].Waiters) != 2 ||
			one.Locks[0].Queued != 3 {
			t.Errorf("one lock, 2 waiters: %+v", one)
		}
		for _, bad := range []string{"?page=0", "?per_page=201", "?waiters=x", "?kind=mutex", "?name=x", "?kind=lock&name=x"} {
			if status, p := readPage(t, srv, bad); status != http.StatusBadRequest || p.Error == "" {
				t.Errorf("%s: status %d, %+v", bad, status, p)
			}
		}
	})
}

// checkShape checks locks.json field by field: every field the package's
// documentation lists, of its JSON type, and no array null.
func checkShape(t *testing.T, srv *httptest.Server) {
	t.Helper()
	_, body := get(t, srv, "/locks.json")
	var p map[string]any
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	fields := func(what string, v any, names string) {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s is %T", what, v)
		}
		for _, f := range strings.Fields(names) {
			name, typ, _ := strings.Cut(f, ":")
			got := fmt.Sprintf("%T", m[name])
			if want := map[string]string{"s": "string", "n": "float64", "b": "bool", "a": "[]interface {}"}[typ]; got != want {
				t.Errorf("%s.%s is %s, want %s", what, name, got, want)
			}
		}
	}
	fields("page", p, "read_at:s refresh_ms:n force_release:b in_use:n matching:n page:n pages:n per_page:n locks:a")
	for _, lk := range p["locks"].([]any) {
		fields("lock", lk, "name:s kind:s capacity:n in_use:n fence:n queued:n holders:a waiters:a groups:a lanes:a")
		m := lk.(map[string]any)
		for _, h := range m["holders"].([]any) {
			fields("holder", h, "token:s lock:s permits:n fence:n ttl_ms:n metadata:s group:s weight:n priority:n multi:s")
		}
		for _, w := range m["waiters"].([]any) {
			fields("waiter", w, "token:s lock:s permits:n position:n ttl_ms:n waited_ms:n metadata:s group:s weight:n priority:n multi:s")
		}
		for _, g := range m["groups"].([]any) {
			fields("group", g, "group:s weight:n holders:n held:n waiting:n share:n fair_share:n")
		}
		for _, l := range m["lanes"].([]any) {
			fields("lane", l, "priority:n holders:n waiting:n longest_wait_ms:n")
		}
	}
}

// With 1,000 locks in use on a real Redis, a page is a page: 20 locks,
// or as many as per_page asks. How long the handler takes to answer, and
// how much it sends, is logged, not asserted: on a loaded machine it says
// how loaded the machine is.
func TestThousandLocksArePaged(t *testing.T) {
	client := redistest.Start(t).Client(t)
	ctx := withTimeout(t, 60*time.Second)
	l := newLocker(t, client)
	for i := range 1000 {
		if _, err := l.TryAcquire(ctx, fmt.Sprintf("job:%04d", i), fairlock.WithMetadata("worker")); err != nil {
			t.Fatal(err)
		}
	}
	h := fairlockhttp.New(newLocker(t, client))
	for _, c := range []struct {
		query      string
		page, size int
		first      string
	}{
		{"", 1, 20, "job:0000"}, // the first: the scan of the locks in use, then a page
		{"", 1, 20, "job:0000"}, // the scan shared, as every refresh within the interval
		{"?page=3&per_page=100", 3, 100, "job:0200"},
		{"?page=99", 50, 20, "job:0980"},
		{"?q=job:09&per_page=200", 1, 100, "job:0900"},
	} {
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/locks.json"+c.query, nil))
		took := time.Since(start)
		var p page
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		t.Logf("locks.json%s: %d locks, %d bytes, in %v", c.query, len(p.Locks), rec.Body.Len(), took.Round(100*time.Microsecond))
		if rec.Code != http.StatusOK || p.InUse != 1000 || p.Page != c.page || len(p.Locks) != c.size || p.Locks[0].Name != c.first ||
			len(p.Locks[0].Holders) != 1 {
			t.Errorf("%s: status %d, in use %d, page %d of %d, %d locks", c.query, rec.Code, p.InUse, p.Page, p.Pages, len(p.Locks))
		}
	}
	rec := httptest.NewRecorder()
	start := time.Now()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	t.Logf("the page's HTML: %d bytes in %v", rec.Body.Len(), time.Since(start).Round(100*time.Microsecond))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "page.js") {
		t.Errorf("the page: %d %s", rec.Code, rec.Body)
	}
}

// A Redis that is down is a message, in the JSON the page shows, and the
// page itself still loads.
func TestRedisStopped(t *testing.T) {
	onScene(t, nil, func(t *testing.T, s scene, srv *httptest.Server, stop func()) {
		if status, p := readPage(t, srv, ""); status != http.StatusOK || len(p.Locks) != 2 {
			t.Fatalf("before: %d %+v", status, p)
		}
		stop()
		for _, q := range []string{"", "?kind=mutex&name=invoice:42"} {
			start := time.Now()
			status, p := readPage(t, srv, q)
			t.Logf("locks.json%s, Redis stopped: %d in %v", q, status, time.Since(start).Round(time.Millisecond))
			if status != http.StatusServiceUnavailable || !strings.Contains(p.Error, "cannot connect to Redis at "+s.client.Options().Addr) {
				t.Errorf("locks.json%s, Redis stopped: status %d, error %q", q, status, p.Error)
			}
		}
		if status, body := get(t, srv, "/"); status != http.StatusOK || !strings.Contains(string(body), `id="banner"`) {
			t.Errorf("the page, Redis stopped: %d %s", status, body)
		}
	})
}

var tokenMeta = regexp.MustCompile(`<meta name="fairlock-token" content="([0-9a-f]+)">`)

// releaseToken is the release token in srv's page.
func releaseToken(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	_, body := get(t, srv, "/")
	m := tokenMeta.FindSubmatch(body)
	if m == nil {
		t.Fatalf("no release token in the page: %s", body)
	}
	return string(m[1])
}

// release posts a release of the holder called token of the mutex
// invoice:42 as the page does, with extra headers and the form's confirm.
func release(t *testing.T, srv *httptest.Server, token, confirm string, header map[string]string) (int, string) {
	t.Helper()
	form := url.Values{"kind": {"mutex"}, "name": {"invoice:42"}, "token": {token}, "confirm": {confirm}}
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/release", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	status, body := do(t, srv, req)
	return status, string(body)
}

func TestForceReleaseIsOffByDefault(t *testing.T) {
	onScene(t, nil, func(t *testing.T, s scene, srv *httptest.Server, _ func()) {
		_, body := get(t, srv, "/")
		if tokenMeta.Match(body) {
			t.Error("a read-only page carries a release token")
		}
		status, msg := release(t, srv, s.holder.Token(), "yes", map[string]string{"Sec-Fetch-Site": "same-origin"})
		if status != http.StatusForbidden || !strings.Contains(msg, "force release is off") {
			t.Errorf("release on a read-only handler: %d %s", status, msg)
		}
		if _, p := readPage(t, srv, "?kind=mutex&name=invoice:42"); p.Locks[0].Holders[0].Token != s.holder.Token() {
			t.Errorf("the holder changed: %+v", p.Locks[0].Holders)
		}
	})
}

func TestForceRelease(t *testing.T) {
	onScene(t, []fairlockhttp.Option{fairlockhttp.WithForceRelease()}, func(t *testing.T, s scene, srv *httptest.Server, _ func()) {
		page := map[string]string{fairlockhttp.TokenHeader: releaseToken(t, srv), "Sec-Fetch-Site": "same-origin", "Origin": srv.URL}
		refused(t, srv, s, page)

		// Confirmed, from the page: the holder ends and the next waiter,
		// the priority 9, is granted.
		status, msg := release(t, srv, s.holder.Token(), "yes", page)
		var out struct {
			Ended   []string
			Granted []struct {
				Token string
				Fence int64
			}
		}
		if err := json.Unmarshal([]byte(msg), &out); err != nil || status != http.StatusOK || len(out.Ended) != 1 ||
			out.Ended[0] != s.holder.Token() || len(out.Granted) != 1 {
			t.Fatalf("the confirmed release: %d %s", status, msg)
		}
		select {
		case lease := <-s.pri:
			if lease.Token() != out.Granted[0].Token || lease.Fence() != out.Granted[0].Fence {
				t.Errorf("granted %s (fence %d), the release said %+v", lease.Token(), lease.Fence(), out.Granted)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the priority waiter was not granted")
		}
		if status, msg := release(t, srv, s.holder.Token(), "yes", page); status != http.StatusConflict || !strings.Contains(msg, "no longer holds") {
			t.Errorf("the same release again: %d %s", status, msg)
		}
	})
}

// refused checks that a release is refused, changing nothing, unless it
// carries all of page's headers, and is confirmed, and is a POST.
func refused(t *testing.T, srv *httptest.Server, s scene, page map[string]string) {
	t.Helper()
	but := func(k, v string) map[string]string {
		h := map[string]string{k: v}
		for hk, hv := range page {
			if hk != k {
				h[hk] = hv
			}
		}
		return h
	}
	for _, c := range []struct {
		what    string
		header  map[string]string
		confirm string
		status  int
		says    string
	}{
		{"from another site", but("Sec-Fetch-Site", "cross-site"), "yes", http.StatusForbidden, "another site"},
		{"from another origin", map[string]string{fairlockhttp.TokenHeader: page[fairlockhttp.TokenHeader], "Origin": "http://elsewhere.example"}, "yes",
			http.StatusForbidden, "another site"},
		{"without the token", but(fairlockhttp.TokenHeader, ""), "yes", http.StatusForbidden, fairlockhttp.TokenHeader},
		{"with a wrong token", but(fairlockhttp.TokenHeader, "00"), "yes", http.StatusForbidden, fairlockhttp.TokenHeader},
		{"unconfirmed", page, "", http.StatusBadRequest, "not confirmed"},
	} {
		if status, msg := release(t, srv, s.holder.Token(), c.confirm, c.header); status != c.status || !strings.Contains(msg, c.says) {
			t.Errorf("a release %s: %d %s; want %d and %q", c.what, status, msg, c.status, c.says)
		}
	}
	if status, _ := get(t, srv, "/release"); status != http.StatusMethodNotAllowed {
		t.Errorf("GET release: %d", status)
	}
	if _, p := readPage(t, srv, "?kind=mutex&name=invoice:42"); p.Locks[0].Holders[0].Token != s.holder.Token() {
		t.Fatalf("a refused release changed the holder: %+v", p.Locks[0].Holders)
	}
}

// The page and its assets: served from the binary, with a policy that
// lets it load nothing from elsewhere; anything else is not found.
func TestPage(t *testing.T) {
	srv := httptest.NewServer(http.StripPrefix("/debug/fairlock", fairlockhttp.New(fairlocktest.New(t))))
	defer srv.Close()
	for _, c := range []struct {
		path, method string
		status       int
		typ          string
	}{
		{"/debug/fairlock/", "GET", 200, "text/html"},
		{"/debug/fairlock/page.js", "GET", 200, "text/javascript"},
		{"/debug/fairlock/page.css", "GET", 200, "text/css"},
		{"/debug/fairlock/locks.json", "GET", 200, "application/json"},
		{"/debug/fairlock/index.html", "GET", 404, ""},
		{"/debug/fairlock/", "POST", 405, ""},
		{"/debug/fairlock/locks.json", "DELETE", 405, ""},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.HasPrefix(resp.Header.Get("Content-Type"), c.typ) {
			t.Errorf("%s %s: %d %s", c.method, c.path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if c.status == 200 && !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Errorf("%s: CSP %q", c.path, resp.Header.Get("Content-Security-Policy"))
		}
	}
	_, body := get(t, srv, "/debug/fairlock/")
	for _, elsewhere := range []string{"http:", "https:", "//"} {
		if strings.Contains(string(body), `="`+elsewhere) {
			t.Errorf("the page loads something from elsewhere (%s): %s", elsewhere, body)
		}
	}
}

// The page reads under the read-only ACL rule of docs/operations.md, as
// written there; a forced release, which writes, is refused by Redis.
func TestReadOnlyACL(t *testing.T) {
	srv := redistest.Start(t)
	s := makeScene(t, srv.Client(t))
	srv.SetUser(t, redistest.DocACLRule(t, "../../docs/operations.md", "fairlock-ops"))
	web := httptest.NewServer(fairlockhttp.New(newLocker(t, srv.ClientAs(t, "fairlock-ops", "ops-secret")), fairlockhttp.WithForceRelease()))
	defer web.Close()
	if status, p := readPage(t, web, ""); status != http.StatusOK || len(p.Locks) != 2 || len(p.Locks[1].Waiters) != 3 {
		t.Fatalf("locks.json as fairlock-ops: %d %+v", status, p)
	}
	status, msg := release(t, web, s.holder.Token(), "yes", map[string]string{fairlockhttp.TokenHeader: releaseToken(t, web), "Sec-Fetch-Site": "same-origin"})
	if status != http.StatusServiceUnavailable || !strings.Contains(msg, "NOPERM") {
		t.Errorf("a release as fairlock-ops: %d %s", status, msg)
	}
}
