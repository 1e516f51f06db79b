package browsertest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/fairlock/fairlockhttp"
	"github.com/fairlock/fairlock/internal/redistest"
)

// mount is where the tests mount the page, as a service would.
const mount = "/debug/fairlock/"

// refresh is how often the page reads the locks again in these tests.
const refresh = fairlockhttp.MinRefresh

// A scene is the page's usual picture, on a real Redis: a mutex with a
// holder and three waiters, one of priority 9; a semaphore shared by a
// group of weight 3 and one of weight 1, with a waiter; a read-write lock
// with two readers and a writer waiting.
type scene struct {
	redis  *redistest.Server
	locker *fairlock.Locker
	holder *fairlock.Lease
	url    string    // the page
	posts  *requests // what reached the page's release
}

func newLocker(t *testing.T, srv *redistest.Server, opts ...fairlock.Option) *fairlock.Locker {
	t.Helper()
	l, err := fairlock.New(srv.Client(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// join starts acquire in the background and returns once it waits in the
// queue; the lease it may get is kept until the test ends.
func join(t *testing.T, acquire func(context.Context, ...fairlock.AcquireOption) (*fairlock.Lease, error), opts ...fairlock.AcquireOption) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	queued, ended := make(chan int, 1), make(chan struct{})
	t.Cleanup(func() { cancel(); <-ended })
	go func() {
		defer close(ended)
		acquire(ctx, append(opts, fairlock.OnQueued(func(p int) { queued <- p }))...) //nolint:errcheck // cancelled at the end
	}()
	select {
	case <-queued:
	case <-time.After(5 * time.Second):
		t.Fatal("not queued within 5 s")
	}
}

// taker returns take, which returns an acquire's lease, or fails the test.
func taker(t *testing.T) func(*fairlock.Lease, error) *fairlock.Lease {
	return func(lease *fairlock.Lease, err error) *fairlock.Lease {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return lease
	}
}

func mutex(l *fairlock.Locker, name string) func(context.Context, ...fairlock.AcquireOption) (*fairlock.Lease, error) {
	return func(ctx context.Context, opts ...fairlock.AcquireOption) (*fairlock.Lease, error) {
		return l.Acquire(ctx, name, opts...)
	}
}

func newScene(t *testing.T) *scene {
	t.Helper()
	ctx, take := context.Background(), taker(t)
	srv := redistest.Start(t)
	a, b := newLocker(t, srv), newLocker(t, srv)
	s := &scene{redis: srv, locker: a, posts: &requests{}}
	s.holder = take(a.Acquire(ctx, "invoice:42", fairlock.WithMetadata("billing-7f9c pid 4121")))
	join(t, mutex(b, "invoice:42"), fairlock.WithMetadata("billing-2c1d pid 388"))
	join(t, mutex(a, "invoice:42"), fairlock.WithMetadata("retry worker 3"))
	join(t, mutex(b, "invoice:42"), fairlock.WithMetadata("on-call fix"), fairlock.WithPriority(9))
	semA, _ := a.Semaphore("exports", 3)
	semB, _ := b.Semaphore("exports", 3)
	take(semA.Acquire(ctx, 2, fairlock.WithGroup("customer-7"), fairlock.WithGroupWeight(3), fairlock.WithMetadata("export 981")))
	take(semB.Acquire(ctx, 1, fairlock.WithGroup("customer-9"), fairlock.WithMetadata("export 982")))
	join(t, func(ctx context.Context, opts ...fairlock.AcquireOption) (*fairlock.Lease, error) {
		return semB.Acquire(ctx, 2, opts...)
	},
		fairlock.WithGroup("customer-9"), fairlock.WithMetadata("export 983"))
	rwA, _ := a.RWMutex("config")
	rwB, _ := b.RWMutex("config")
	take(rwA.RLock(ctx, fairlock.WithMetadata("reader api-1")))
	take(rwB.RLock(ctx, fairlock.WithMetadata("reader api-2")))
	join(t, rwB.Lock, fairlock.WithMetadata("deploy 17"))

	page := fairlockhttp.New(newLocker(t, srv), fairlockhttp.WithForceRelease(), fairlockhttp.WithRefresh(refresh))
	mux := http.NewServeMux()
	mux.Handle(mount, http.StripPrefix(strings.TrimSuffix(mount, "/"), page))
	web := httptest.NewServer(s.posts.record(mux))
	t.Cleanup(web.Close)
	s.url = web.URL + mount
	return s
}

// holderOf is the holder of the mutex name, read from Redis.
func (s *scene) holderOf(t *testing.T, name string) fairlock.Holder {
	t.Helper()
	st, err := s.locker.Inspect(context.Background(), fairlock.LockMutex, name)
	if err != nil || len(st.Holders) != 1 {
		t.Fatalf("Inspect %s: %+v, %v", name, st, err)
	}
	return st.Holders[0]
}

// requests records the method and answer of each request to release.
type requests struct {
	mu   sync.Mutex
	seen []string
}

func (r *requests) record(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		sw := &status{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, req)
		if strings.HasSuffix(req.URL.Path, "/release") {
			r.mu.Lock()
			r.seen = append(r.seen, req.Method+" "+strconv.Itoa(sw.code))
			r.mu.Unlock()
		}
	})
}

// take returns the requests recorded since the last call.
func (r *requests) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := r.seen
	r.seen = nil
	return seen
}

type status struct {
	http.ResponseWriter
	code int
}

func (s *status) WriteHeader(code int) { s.code = code; s.ResponseWriter.WriteHeader(code) }

// rows are a lock's holders and waiters as the page shows them, by their
// metadata, in order.
type rows struct {
	Holders []string `json:"holders"`
	Waiters []string `json:"waiters"`
}

// rowsOf is the JavaScript that reads the rows of the lock called name.
func rowsOf(name string) string {
	return fmt.Sprintf(`(() => {
  const s = [...document.querySelectorAll('section.lock')].find((e) => e.dataset.name === %s);
  const col = (t) => s ? [...s.querySelectorAll('table.' + t + ' tbody td.meta')].map((td) => td.textContent) : null;
  return { holders: col('holders'), waiters: col('waiters') };
})()`, jsString(name))
}

// in is a selector within the section of the lock called name.
func in(name, selector string) string {
	return fmt.Sprintf(`section.lock[data-name=%s] %s`, jsString(name), selector)
}
