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
	return fairlock.Event{Kind: kind, Name: "n", Token: token, Fence: fence}
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
