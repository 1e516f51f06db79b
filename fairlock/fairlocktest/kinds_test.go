package fairlocktest

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
)

// hammer runs lockers × perLocker goroutines that each take a lease
// rounds times through take, hold it briefly and release it through rec.
// take also says what the lease adds to a count of what is held; hammer
// returns the most that count reached.
func hammer(t *testing.T, lockers []*fairlock.Locker, perLocker, rounds int, rec *Recorder,
	take func(ctx context.Context, l *fairlock.Locker, g int) (*fairlock.Lease, int, error)) int64 {
	t.Helper()
	ctx := testContext(t, 20*time.Second)
	var (
		inUse, most atomic.Int64
		wg          sync.WaitGroup
	)
	for _, l := range lockers {
		for g := range perLocker {
			wg.Go(func() {
				for range rounds {
					lease, n, err := take(ctx, l, g)
					if err != nil {
						t.Error(err)
						return
					}
					now := inUse.Add(int64(n))
					for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
					}
					time.Sleep(time.Duration(rand.IntN(1000)) * time.Microsecond)
					inUse.Add(-int64(n))
					if err := rec.Release(ctx, lease); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	return most.Load()
}

// Four Lockers on one embedded server, four goroutines each, asking for
// one to three permits of a semaphore of five: the Recorder and a counter
// in the holders agree that no more than five were ever held.
func TestSemaphoreOnServer(t *testing.T) {
	srv := NewServer(t)
	rec := NewRecorder()
	lockers := make([]*fairlock.Locker, 4)
	for i := range lockers {
		lockers[i] = srv.Locker(t, rec.Option())
	}
	const capacity = 5
	most := hammer(t, lockers, 4, 10, rec, func(ctx context.Context, l *fairlock.Locker, g int) (*fairlock.Lease, int, error) {
		sem, err := l.Semaphore("s", capacity)
		if err != nil {
			return nil, 0, err
		}
		n := 1 + g%3
		lease, err := sem.Acquire(ctx, n)
		return lease, n, err
	})
	if most > capacity {
		t.Errorf("holders counted %d permits at once, over %d", most, capacity)
	}
	if got := len(rec.Filter("s", fairlock.EventGranted)); got != 160 {
		t.Errorf("grants: got %d, want 160", got)
	}
	rec.AssertCapacity(t, "s", capacity)
	rec.AssertFences(t, "s")
	for _, e := range rec.Filter("s", fairlock.EventGranted) {
		if e.Lock != fairlock.LockSemaphore || e.Permits < 1 || e.Permits > 3 {
			t.Fatalf("grant event: Lock %v, Permits %d", e.Lock, e.Permits)
		}
	}
}

// Readers and writers from four Lockers: no writer ever shared the lock,
// by the Recorder and by a counter in the holders.
func TestRWMutexOnServer(t *testing.T) {
	srv := NewServer(t)
	rec := NewRecorder()
	lockers := make([]*fairlock.Locker, 4)
	for i := range lockers {
		lockers[i] = srv.Locker(t, rec.Option())
	}
	const writer = 1000 // a writer's weight on the counter: anything above the readers
	most := hammer(t, lockers, 4, 10, rec, func(ctx context.Context, l *fairlock.Locker, g int) (*fairlock.Lease, int, error) {
		m, err := l.RWMutex("rw")
		if err != nil {
			return nil, 0, err
		}
		if g == 0 {
			lease, err := m.Lock(ctx)
			return lease, writer, err
		}
		lease, err := m.RLock(ctx)
		return lease, 1, err
	})
	if most > writer {
		t.Errorf("a writer shared the lock: the holders counted %d", most)
	}
	rec.AssertExclusive(t, "rw")
	rec.AssertFences(t, "rw")
	writes := 0
	for _, e := range rec.Filter("rw", fairlock.EventGranted) {
		if !e.Shared {
			writes++
		}
	}
	if writes != 40 {
		t.Errorf("writers granted: got %d, want 40", writes)
	}
}

// queue starts one waiter per entry of take, each after the previous one
// queued, while the lock is held, and returns a channel that yields each
// waiter's lease as it is granted (in any order) along with its index.
func queue(t *testing.T, ctx context.Context, rec *Recorder, name string, take []func(context.Context) (*fairlock.Lease, error)) <-chan granted {
	t.Helper()
	out := make(chan granted, len(take))
	for i, f := range take {
		go func() {
			lease, err := f(ctx)
			out <- granted{i, lease, err}
		}()
		if err := rec.Wait(ctx, name, fairlock.EventEnqueued, i+1); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

type granted struct {
	i     int
	lease *fairlock.Lease
	err   error
}

// next returns the indices of the waiters granted, in increasing order,
// once n of them were; it fails the test if more were granted in the
// meantime.
func next(t *testing.T, ctx context.Context, ch <-chan granted, n int, leases []*fairlock.Lease) []int {
	t.Helper()
	var got []int
	for len(got) < n {
		select {
		case g := <-ch:
			if g.err != nil {
				t.Fatalf("waiter %d: %v", g.i, g.err)
			}
			leases[g.i] = g.lease
			got = append(got, g.i)
		case <-ctx.Done():
			t.Fatalf("waiting for %d grants, got %v: %v", n, got, ctx.Err())
		}
	}
	// Whatever the script granted with them has been reported by now: a
	// grant is one message to each Locker, heard within a round trip or two.
	select {
	case g := <-ch:
		t.Fatalf("waiter %d granted along with %v", g.i, got)
	case <-time.After(100 * time.Millisecond):
	}
	slices.Sort(got)
	return got
}

// Weights on the embedded server: the head-of-line rule and FIFO, checked
// by the Recorder.
func TestSemaphoreFIFOOnServer(t *testing.T) {
	srv := NewServer(t)
	rec := NewRecorder()
	ctx := testContext(t, 10*time.Second)
	sem := func() *fairlock.Semaphore {
		s, err := srv.Locker(t, rec.Option()).Semaphore("s", 3)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	holder, err := sem().Acquire(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	weights := []int{1, 3, 1, 2} // 1 fits, 3 waits for all, then 1 and 2 together
	var take []func(context.Context) (*fairlock.Lease, error)
	for _, n := range weights {
		s := sem()
		take = append(take, func(ctx context.Context) (*fairlock.Lease, error) { return s.Acquire(ctx, n) })
	}
	ch := queue(t, ctx, rec, "s", take)
	leases := make([]*fairlock.Lease, len(weights))
	if _, err := sem().TryAcquire(ctx, 1); !errors.Is(err, fairlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire with waiters queued: got %v, want ErrNotAcquired", err)
	}
	if err := rec.Release(ctx, holder); err != nil {
		t.Fatal(err)
	}
	if got := next(t, ctx, ch, 1, leases); !slices.Equal(got, []int{0}) {
		t.Fatalf("after the holder: granted %v, want [0] (the 3 waits, and the 1 behind it too)", got)
	}
	if err := rec.Release(ctx, leases[0]); err != nil {
		t.Fatal(err)
	}
	if got := next(t, ctx, ch, 1, leases); !slices.Equal(got, []int{1}) {
		t.Fatalf("then: granted %v, want [1]", got)
	}
	if err := rec.Release(ctx, leases[1]); err != nil {
		t.Fatal(err)
	}
	if got := next(t, ctx, ch, 2, leases); !slices.Equal(got, []int{2, 3}) {
		t.Fatalf("then: granted %v, want [2 3] together", got)
	}
	for _, l := range leases[2:] {
		if err := rec.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	rec.AssertFIFO(t, "s")
	rec.AssertCapacity(t, "s", 3)
	rec.AssertFences(t, "s")
	var want []string
	want = append(want, holder.Token())
	for _, l := range leases {
		want = append(want, l.Token())
	}
	rec.AssertGrantOrder(t, "s", want...)
}

// A run of readers at the head is granted together; a reader behind a
// queued writer waits for it.
func TestRWMutexFIFOOnServer(t *testing.T) {
	srv := NewServer(t)
	rec := NewRecorder()
	ctx := testContext(t, 10*time.Second)
	rw := func() *fairlock.RWMutex {
		m, err := srv.Locker(t, rec.Option()).RWMutex("rw")
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	holder, err := rw().Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var take []func(context.Context) (*fairlock.Lease, error)
	for _, write := range []bool{false, false, true, false} {
		m := rw()
		take = append(take, func(ctx context.Context) (*fairlock.Lease, error) {
			if write {
				return m.Lock(ctx)
			}
			return m.RLock(ctx)
		})
	}
	ch := queue(t, ctx, rec, "rw", take)
	leases := make([]*fairlock.Lease, len(take))
	if err := rec.Release(ctx, holder); err != nil {
		t.Fatal(err)
	}
	if got := next(t, ctx, ch, 2, leases); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("after the writer: granted %v, want the readers [0 1] together", got)
	}
	if st, err := rw().Inspect(ctx); err != nil || len(st.Holders) != 2 || !st.Holders[0].Shared || len(st.Waiters) != 2 {
		t.Errorf("Inspect with two readers and two waiting: %+v, %v", st, err)
	}
	for _, l := range leases[:2] {
		if err := rec.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if got := next(t, ctx, ch, 1, leases); !slices.Equal(got, []int{2}) {
		t.Fatalf("then: granted %v, want the writer [2]", got)
	}
	if err := rec.Release(ctx, leases[2]); err != nil {
		t.Fatal(err)
	}
	if got := next(t, ctx, ch, 1, leases); !slices.Equal(got, []int{3}) {
		t.Fatalf("then: granted %v, want the last reader [3]", got)
	}
	if err := rec.Release(ctx, leases[3]); err != nil {
		t.Fatal(err)
	}
	rec.AssertFIFO(t, "rw")
	rec.AssertExclusive(t, "rw")
	rec.AssertFences(t, "rw")
}
