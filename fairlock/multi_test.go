package fairlock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/fairlock/fairlock/internal/transfers"
)

// Tests of MultiMutex: all or nothing, no deadlock whatever order callers
// name their locks in, FIFO in each queue, nothing left behind by a
// cancelled call.

func mustMulti(t testing.TB, l *fairlock.Locker, names ...string) *fairlock.MultiMutex {
	t.Helper()
	m, err := l.MultiMutex(names...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Transfers between accounts, each locking both, named in a random order,
// from four Lockers at once: every transfer finishes within its ctx (no
// deadlock), no account is in two transfers at once, and the total is
// conserved.
func TestMultiMutexTransfers(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const accounts, lockers, workers = 5, 4, 2
	var ls []*fairlock.Locker
	for range lockers {
		ls = append(ls, newLocker(t, srv.Client(t)))
	}
	n := transfers.Run(t, ls, "account:", accounts, workers, 2*time.Second, time.Millisecond)
	t.Logf("%d transfers by %d Lockers × %d workers among %d accounts", n, lockers, workers, accounts)
}

// A multi-request queued behind a stream of single requests on one of its
// mutexes is granted within its FIFO bound there: the stream's requests
// that queued after it do not pass it.
func TestMultiMutexBehindAStream(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	const streams, holdFor = 3, 20 * time.Millisecond
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range streams {
		l := newLocker(t, srv.Client(t))
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				lease, err := l.Acquire(ctx, "b")
				if err != nil {
					t.Error(err)
					return
				}
				time.Sleep(holdFor)
				released(t, lease)
			}
		})
	}
	time.Sleep(100 * time.Millisecond) // the stream is flowing
	m := mustMulti(t, newLocker(t, srv.Client(t)), "b", "a")
	start := time.Now()
	got, err := m.Acquire(ctx)
	waited := time.Since(start)
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	// At most every stream request is ahead of it in b's queue, each held
	// holdFor, each hand-off within a heartbeat.
	bound := streams*(holdFor+heartbeat) + slack
	if waited > bound {
		t.Errorf("the multi-request waited %v behind a stream of %d; bound %v", waited, streams, bound)
	}
	if !slices.Equal(m.Names(), []string{"a", "b"}) || got.Fence("a") == 0 || got.Fence("b") == 0 || got.Err() != nil {
		t.Errorf("names %v, fences %d and %d, Err %v", m.Names(), got.Fence("a"), got.Fence("b"), got.Err())
	}
	if err := got.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(got.Err(), fairlock.ErrReleased) {
		t.Errorf("Err after Release: %v", got.Err())
	}
	wg.Wait()
	t.Logf("granted after %v behind a stream of %d (bound %v)", waited.Round(time.Millisecond), streams, bound)
}

// A call that fails or is cancelled, while waiting for its first mutex or
// holding it and waiting for the second, leaves nothing in either queue;
// every key keeps a TTL.
func TestMultiMutexLeavesNothing(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	other := newLocker(t, srv.Client(t))
	l := newLocker(t, srv.Client(t))
	m := mustMulti(t, l, "y", "x")
	for _, busy := range []string{"x", "y"} {
		held := mustAcquire(t, other, busy)
		if _, err := m.TryAcquire(ctx); !errors.Is(err, fairlock.ErrNotAcquired) {
			t.Fatalf("TryAcquire with %s held: %v, want ErrNotAcquired", busy, err)
		}
		cctx, cancel := context.WithTimeout(ctx, 3*heartbeat)
		_, err := m.Acquire(cctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire with %s held: %v, want context.DeadlineExceeded", busy, err)
		}
		for _, name := range []string{"x", "y"} {
			st, err := l.Inspect(ctx, fairlock.LockMutex, name)
			if err != nil {
				t.Fatal(err)
			}
			holds := st.Held() && st.Holders[0].Token == held.Token()
			if len(st.Waiters) != 0 || st.Held() && !holds || (name == busy) != holds {
				t.Errorf("with %s held, after the failed calls, %s is %+v", busy, name, st)
			}
		}
		keysWithTTLs(t, ctx, srv.Client(t), "after a cancelled MultiMutex")
		released(t, held)
	}
	for _, names := range [][]string{nil, {"x", "x"}, {"x", ""}} {
		if _, err := l.MultiMutex(names...); !errors.Is(err, fairlock.ErrInvalid) {
			t.Errorf("MultiMutex(%q): %v, want ErrInvalid", names, err)
		}
	}
	if err := m.Do(ctx, nil); !errors.Is(err, fairlock.ErrInvalid) {
		t.Errorf("Do(nil): %v, want ErrInvalid", err)
	}
}

// On one Redis node a MultiMutex's request joins every queue at once: held
// up in a (held by x), it is already ahead of a later single request in b,
// and is granted b when b comes free, while it waits for a; the single
// request waits until the MultiMutex releases. Its wait is its longest
// queue's, not the sum of its queues'. A priority is refused: it could
// order two requests one way in one queue and the other way in another.
func TestMultiMutexQueuesEverywhereAtOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	x, y, single := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	var observed sync.Map // Event.Multi of the MultiMutex's grants, by lock name
	m := mustMulti(t, newLocker(t, srv.Client(t), fairlock.WithObserver(func(e fairlock.Event) {
		if e.Kind == fairlock.EventGranted {
			observed.Store(e.Name, e.Multi)
		}
	})), "a", "b")
	holdsA, holdsB := mustAcquire(t, x, "a"), mustAcquire(t, y, "b")
	multi := make(chan *fairlock.MultiLease, 1)
	queued := make(chan int, 2)
	go func() {
		got, err := m.Acquire(ctx, fairlock.OnQueued(func(int) { queued <- 1 }))
		if err != nil {
			t.Error(err)
		}
		multi <- got
	}()
	for range 2 {
		select {
		case <-queued:
		case <-time.After(5 * time.Second):
			t.Fatal("the MultiMutex did not queue in both queues")
		}
	}
	later := queueFor(t, ctx, func(ctx context.Context, opts ...fairlock.AcquireOption) (*fairlock.Lease, error) {
		return single.Acquire(ctx, "b", opts...)
	})
	// Inspect labels the request's part in each queue as one request.
	multiIn := map[string]string{}
	for _, name := range []string{"a", "b"} {
		st, err := x.Inspect(ctx, fairlock.LockMutex, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range st.Waiters {
			if w.Multi != "" {
				multiIn[name] = w.Multi
			}
		}
		if st.Holders[0].Multi != "" || name == "b" && st.Waiters[len(st.Waiters)-1].Multi != "" {
			t.Errorf("%s: a single request labelled as a part of %q", name, st.Holders[0].Multi)
		}
	}
	if multiIn["a"] == "" || multiIn["a"] != multiIn["b"] {
		t.Errorf("Waiter.Multi in a and b: %q and %q, want one label, not empty", multiIn["a"], multiIn["b"])
	}
	released(t, holdsB)
	notGranted(t, later, 3*heartbeat, "a single request queued in b after the MultiMutex")
	released(t, holdsA)
	var got *fairlock.MultiLease
	select {
	case got = <-multi:
	case <-time.After(heartbeat + slack):
		t.Fatal("the MultiMutex was not granted within a hand-off of a's release")
	}
	if got == nil {
		t.FailNow()
	}
	for _, name := range []string{"a", "b"} {
		if e, _ := observed.Load(name); e != multiIn["a"] {
			t.Errorf("the grant of %s reported Event.Multi %q, want %q", name, e, multiIn["a"])
		}
	}
	if err := got.Release(ctx); err != nil {
		t.Fatal(err)
	}
	s, _ := await(t, later, heartbeat+slack)
	released(t, s)
	if _, err := m.Acquire(ctx, fairlock.WithPriority(1)); !errors.Is(err, fairlock.ErrInvalid) {
		t.Errorf("Acquire with a priority: %v, want ErrInvalid", err)
	}
}
