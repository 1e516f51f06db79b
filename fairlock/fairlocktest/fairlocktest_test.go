package fairlocktest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fairlock/fairlock/fairlock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testContext returns a context that ends after d or when the test ends.
func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestNew(t *testing.T) {
	rec := NewRecorder()
	l := New(t, rec.Option())
	ctx := testContext(t, 5*time.Second)
	lease, err := l.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	rec.AssertGrantOrder(t, "x", lease.Token())
	if got := len(rec.Filter("x", fairlock.EventReleased)); got != 1 {
		t.Errorf("released events: got %d, want 1", got)
	}
}

// Leases expire in real time on the embedded server, as they do on Redis.
func TestLeaseExpires(t *testing.T) {
	srv := NewServer(t)
	opts := []fairlock.Option{fairlock.WithLeaseTTL(200 * time.Millisecond), fairlock.WithWaiterTTL(300 * time.Millisecond)}
	a := srv.Locker(t, append(opts, fairlock.WithAutoRenew(false))...)
	b := srv.Locker(t, opts...)
	ctx := testContext(t, 3*time.Second)
	first, err := a.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Acquire(ctx, "x") // granted once first's lease ran out
	if err != nil {
		t.Fatal(err)
	}
	if second.Fence() <= first.Fence() {
		t.Errorf("fence did not grow: %d then %d", first.Fence(), second.Fence())
	}
	if err := first.Release(ctx); !errors.Is(err, fairlock.ErrNotHeld) {
		t.Errorf("release of expired lease: got %v, want ErrNotHeld", err)
	}
}

func TestServerClose(t *testing.T) {
	srv, err := StartServer()
	if err != nil {
		t.Fatal(err)
	}
	l, err := srv.NewLocker()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := l.TryAcquire(context.Background(), "x"); !errors.Is(err, fairlock.ErrClosed) {
		t.Errorf("Locker after server Close: got %v, want ErrClosed", err)
	}
	if _, err := srv.NewLocker(); !errors.Is(err, fairlock.ErrClosed) {
		t.Errorf("NewLocker after Close: got %v, want ErrClosed", err)
	}
}

func ev(kind fairlock.EventKind, token string, fence int64) fairlock.Event {
	return fairlock.Event{Kind: kind, Name: "n", Lock: fairlock.LockMutex, Token: token, Fence: fence}
}

func TestCheckFIFO(t *testing.T) {
	const (
		enq = fairlock.EventEnqueued
		gr  = fairlock.EventGranted
		can = fairlock.EventCancelled
	)
	for _, tc := range []struct {
		name   string
		events []fairlock.Event
		ok     bool
	}{
		{"in order", []fairlock.Event{ev(gr, "h", 1), ev(enq, "a", 0), ev(enq, "b", 0), ev(gr, "a", 2), ev(gr, "b", 3)}, true},
		{"out of order", []fairlock.Event{ev(enq, "a", 0), ev(enq, "b", 0), ev(gr, "b", 2), ev(gr, "a", 3)}, false},
		{"cancelled waiter skipped", []fairlock.Event{ev(enq, "a", 0), ev(enq, "b", 0), ev(enq, "c", 0), ev(can, "b", 0), ev(gr, "a", 1), ev(gr, "c", 2)}, true},
		{"not yet granted", []fairlock.Event{ev(enq, "a", 0), ev(enq, "b", 0), ev(gr, "a", 1)}, true},
		{"requeued after eviction", []fairlock.Event{ev(enq, "a", 0), ev(enq, "b", 0), ev(enq, "a", 0), ev(gr, "a", 1), ev(gr, "b", 2)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRecorder()
			for _, e := range tc.events {
				r.Record(e)
			}
			if err := r.CheckFIFO("n"); (err == nil) != tc.ok {
				t.Errorf("CheckFIFO: %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestCheckFences(t *testing.T) {
	r := NewRecorder()
	r.Record(ev(fairlock.EventGranted, "a", 5))
	r.Record(ev(fairlock.EventGranted, "b", 9))
	if err := r.CheckFences("n"); err != nil {
		t.Error(err)
	}
	r.Record(ev(fairlock.EventGranted, "c", 9))
	if err := r.CheckFences("n"); err == nil || !strings.Contains(err.Error(), "from 9 (b) to 9 (c)") {
		t.Errorf("repeated fence: got %v", err)
	}
	if err := r.CheckGrantOrder("n", "a", "b", "c"); err != nil {
		t.Error(err)
	}
	if err := r.CheckGrantOrder("n", "a", "c"); err == nil {
		t.Error("CheckGrantOrder accepted a wrong order")
	}
}

func TestWait(t *testing.T) {
	r := NewRecorder()
	ctx := testContext(t, 2*time.Second)
	go func() {
		r.Record(ev(fairlock.EventEnqueued, "a", 0))
		r.Record(ev(fairlock.EventEnqueued, "b", 0))
	}()
	if err := r.Wait(ctx, "n", fairlock.EventEnqueued, 2); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := r.Wait(short, "n", fairlock.EventEnqueued, 3); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait past deadline: got %v", err)
	}
	r.Reset()
	if len(r.Events()) != 0 {
		t.Error("Reset kept events")
	}
}

// Real Lockers: a holder, then three waiters queued in a known order; the
// middle one gives up. The other two are served in order, and the Recorder
// saw the cancellation.
func TestRecorderWithCancelledWaiter(t *testing.T) {
	srv := NewServer(t)
	rec := NewRecorder()
	ctx := testContext(t, 5*time.Second)
	holder, err := srv.Locker(t, rec.Option()).Acquire(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		i     int
		token string
		err   error
	}
	results := make(chan result, 3)
	quit := make([]context.CancelFunc, 3)
	for i := range 3 {
		wctx, wcancel := context.WithCancel(ctx)
		quit[i] = wcancel
		l := srv.Locker(t, rec.Option())
		go func() {
			lease, err := l.Acquire(wctx, "q")
			if err != nil {
				results <- result{i, "", err}
				return
			}
			results <- result{i, lease.Token(), lease.Release(ctx)}
		}()
		if err := rec.Wait(ctx, "q", fairlock.EventEnqueued, i+1); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, q := range quit {
			q()
		}
	}()
	quit[1]()
	if err := rec.Wait(ctx, "q", fairlock.EventCancelled, 1); err != nil {
		t.Fatal(err)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var tokens [3]string
	for range 3 {
		r := <-results
		if r.i == 1 {
			if !errors.Is(r.err, context.Canceled) {
				t.Errorf("cancelled waiter: got %v, want context.Canceled", r.err)
			}
			continue
		}
		if r.err != nil {
			t.Fatalf("waiter %d: %v", r.i, r.err)
		}
		tokens[r.i] = r.token
	}
	rec.AssertFIFO(t, "q")
	rec.AssertGrantOrder(t, "q", holder.Token(), tokens[0], tokens[2])
	rec.AssertFences(t, "q")
}

// reader and writer stand, in kev, for a read-write lock's requests.
const (
	reader fairlock.LockKind = -1
	writer fairlock.LockKind = -2
)

// kev is an event of lock kind lock (or reader, or writer) on the lock
// called "n".
func kev(kind fairlock.EventKind, lock fairlock.LockKind, token string, fence int64, permits int) fairlock.Event {
	e := fairlock.Event{Kind: kind, Name: "n", Lock: lock, Token: token, Fence: fence, Permits: permits}
	if lock == reader || lock == writer {
		e.Lock, e.Shared = fairlock.LockRWMutex, lock == reader
	}
	return e
}

// Holders granted together report their grants in any order: FIFO and
// Granted go by fence, and only exclusive grants pin the reported order.
func TestKindsOrder(t *testing.T) {
	const (
		enq = fairlock.EventEnqueued
		gr  = fairlock.EventGranted
		sem = fairlock.LockSemaphore
		rd  = reader
		wr  = writer
	)
	for _, tc := range []struct {
		name         string
		events       []fairlock.Event
		fifo, fences bool
	}{
		{"semaphore batch reported out of order",
			[]fairlock.Event{kev(enq, sem, "a", 0, 1), kev(enq, sem, "b", 0, 2), kev(gr, sem, "b", 6, 2), kev(gr, sem, "a", 5, 1)}, true, true},
		{"semaphore granted out of queue order",
			[]fairlock.Event{kev(enq, sem, "a", 0, 3), kev(enq, sem, "b", 0, 1), kev(gr, sem, "b", 5, 1), kev(gr, sem, "a", 6, 3)}, false, true},
		{"semaphore fence twice",
			[]fairlock.Event{kev(gr, sem, "a", 5, 1), kev(gr, sem, "b", 5, 1)}, true, false},
		{"readers batched, then a writer",
			[]fairlock.Event{kev(enq, rd, "r1", 0, 1), kev(enq, rd, "r2", 0, 1), kev(enq, wr, "w", 0, 1),
				kev(gr, rd, "r2", 3, 1), kev(gr, rd, "r1", 2, 1), kev(gr, wr, "w", 4, 1)}, true, true},
		{"reader passed a queued writer",
			[]fairlock.Event{kev(enq, wr, "w", 0, 1), kev(enq, rd, "r", 0, 1), kev(gr, rd, "r", 2, 1), kev(gr, wr, "w", 3, 1)}, false, true},
		{"writer's fence below a reader reported before it",
			[]fairlock.Event{kev(gr, rd, "r", 7, 1), kev(gr, wr, "w", 6, 1)}, true, false},
		{"writer's fence above a reader reported after it",
			[]fairlock.Event{kev(gr, wr, "w", 6, 1), kev(gr, rd, "r", 5, 1)}, true, false},
		{"a lost reader's late report",
			[]fairlock.Event{kev(gr, wr, "w", 6, 1), kev(gr, rd, "r", 5, 1), kev(fairlock.EventLost, rd, "r", 5, 1)}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRecorder()
			for _, e := range tc.events {
				r.Record(e)
			}
			if err := r.CheckFIFO("n"); (err == nil) != tc.fifo {
				t.Errorf("CheckFIFO: %v, want ok=%v", err, tc.fifo)
			}
			if err := r.CheckFences("n"); (err == nil) != tc.fences {
				t.Errorf("CheckFences: %v, want ok=%v", err, tc.fences)
			}
		})
	}
	r := NewRecorder()
	r.Record(kev(gr, sem, "b", 6, 1))
	r.Record(kev(gr, sem, "a", 5, 1))
	if err := r.CheckGrantOrder("n", "a", "b"); err != nil {
		t.Error(err)
	}
}

// A mutex, a semaphore and a read-write lock of one name are three locks:
// their fences, queues and holders are checked apart. Mixed, the mutex's
// and the RWMutex's fences would repeat, and the mutex holders m1 and m2
// would overlap the reader r1.
func TestKindsApart(t *testing.T) {
	r := NewRecorder()
	for _, e := range []fairlock.Event{
		kev(fairlock.EventGranted, fairlock.LockMutex, "m1", 10, 1),
		kev(fairlock.EventGranted, fairlock.LockSemaphore, "s1", 3, 2),
		kev(fairlock.EventGranted, writer, "w1", 10, 1),
		kev(fairlock.EventReleased, writer, "w1", 10, 1),
		kev(fairlock.EventGranted, reader, "r1", 11, 1),
		kev(fairlock.EventReleased, fairlock.LockMutex, "m1", 10, 1),
		kev(fairlock.EventGranted, fairlock.LockMutex, "m2", 11, 1),
	} {
		r.Record(e)
	}
	for check, err := range map[string]error{
		"CheckFences":    r.CheckFences("n"),
		"CheckFIFO":      r.CheckFIFO("n"),
		"CheckCapacity":  r.CheckCapacity("n", 2),
		"CheckExclusive": r.CheckExclusive("n"),
	} {
		if err != nil {
			t.Errorf("%s: %v", check, err)
		}
	}
	if got := r.Granted("n"); len(got) != 5 {
		t.Errorf("Granted lists every kind's grants: got %v", got)
	}
}

// An event of a kind of lock fairlock does not have (an Event made by hand
// without its Lock, or a value of no kind) is an error of every check of
// its lock's name, not a mutex's event.
func TestUnknownKindIsAnError(t *testing.T) {
	for _, lock := range []fairlock.LockKind{0, 99} {
		r := NewRecorder()
		r.Record(kev(fairlock.EventGranted, fairlock.LockMutex, "m1", 1, 1))
		r.Record(kev(fairlock.EventGranted, lock, "x1", 2, 1))
		for check, err := range map[string]error{
			"CheckFences":     r.CheckFences("n"),
			"CheckFIFO":       r.CheckFIFO("n"),
			"CheckGrantOrder": r.CheckGrantOrder("n", "m1"),
			"CheckCapacity":   r.CheckCapacity("n", 2),
			"CheckExclusive":  r.CheckExclusive("n"),
		} {
			if !errors.Is(err, fairlock.ErrInvalid) || !strings.Contains(err.Error(), "x1") {
				t.Errorf("kind %d: %s = %v, want ErrInvalid naming x1", lock, check, err)
			}
		}
		if err := r.CheckFences("other"); err != nil {
			t.Errorf("kind %d: a check of another name: %v", lock, err)
		}
	}
}

func TestCheckCapacity(t *testing.T) {
	const (
		gr  = fairlock.EventGranted
		rel = fairlock.EventReleased
		sem = fairlock.LockSemaphore
	)
	for _, tc := range []struct {
		name      string
		events    []fairlock.Event
		releasing map[int][]string // before event i, Release was called on these
		ok        bool
		hint      bool
	}{
		{"within", []fairlock.Event{kev(gr, sem, "a", 1, 2), kev(gr, sem, "b", 2, 1), kev(rel, sem, "a", 1, 2), kev(gr, sem, "c", 3, 2)}, nil, true, false},
		{"over", []fairlock.Event{kev(gr, sem, "a", 1, 2), kev(gr, sem, "b", 2, 2)}, nil, false, false},
		// The hand-off: b is granted by a's release, and reports first.
		{"hand-off reported late", []fairlock.Event{kev(gr, sem, "a", 1, 3), kev(gr, sem, "b", 2, 3), kev(rel, sem, "a", 1, 3)}, nil, false, true},
		{"hand-off through Recorder.Release", []fairlock.Event{kev(gr, sem, "a", 1, 3), kev(gr, sem, "b", 2, 3), kev(rel, sem, "a", 1, 3)},
			map[int][]string{1: {"a"}}, true, false},
		{"Release called after the next grant", []fairlock.Event{kev(gr, sem, "a", 1, 3), kev(gr, sem, "b", 2, 3), kev(rel, sem, "a", 1, 3)},
			map[int][]string{2: {"a"}}, false, false},
		{"lost ends a lease", []fairlock.Event{kev(gr, sem, "a", 1, 3), kev(fairlock.EventLost, sem, "a", 1, 3), kev(gr, sem, "b", 2, 3)}, nil, true, false},
		{"held to the end", []fairlock.Event{kev(gr, sem, "a", 1, 1), kev(gr, sem, "b", 2, 1), kev(rel, sem, "b", 2, 1), kev(gr, sem, "c", 3, 3)}, nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRecorder()
			for i, e := range tc.events {
				for _, tok := range tc.releasing[i] {
					r.releasing(tok)
				}
				r.Record(e)
			}
			err := r.CheckCapacity("n", 3)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckCapacity: %v, want ok=%v", err, tc.ok)
			}
			if hint := err != nil && strings.Contains(err.Error(), "Recorder.Release"); hint != tc.hint {
				t.Errorf("hint about Recorder.Release: %v, want %v: %v", hint, tc.hint, err)
			}
		})
	}
	if err := NewRecorder().CheckCapacity("n", 0); err == nil {
		t.Error("CheckCapacity accepted capacity 0")
	}
}

func TestCheckExclusive(t *testing.T) {
	const (
		gr  = fairlock.EventGranted
		rel = fairlock.EventReleased
		rd  = reader
		wr  = writer
	)
	for _, tc := range []struct {
		name   string
		events []fairlock.Event
		ok     bool
	}{
		{"readers share", []fairlock.Event{kev(gr, rd, "r1", 1, 1), kev(gr, rd, "r2", 2, 1), kev(rel, rd, "r1", 1, 1), kev(rel, rd, "r2", 2, 1), kev(gr, wr, "w", 3, 1)}, true},
		{"writer with a reader", []fairlock.Event{kev(gr, rd, "r1", 1, 1), kev(gr, wr, "w", 2, 1)}, false},
		{"reader with a writer", []fairlock.Event{kev(gr, wr, "w", 1, 1), kev(gr, rd, "r1", 2, 1)}, false},
		{"two writers", []fairlock.Event{kev(gr, wr, "w1", 1, 1), kev(gr, wr, "w2", 2, 1)}, false},
		{"writer after the writer", []fairlock.Event{kev(gr, wr, "w1", 1, 1), kev(rel, wr, "w1", 1, 1), kev(gr, wr, "w2", 2, 1)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRecorder()
			for _, e := range tc.events {
				r.Record(e)
			}
			if err := r.CheckExclusive("n"); (err == nil) != tc.ok {
				t.Errorf("CheckExclusive: %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
