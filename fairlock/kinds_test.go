package fairlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// acquireFunc is one way to wait for a lease: a semaphore's Acquire of n
// permits, an RWMutex's Lock or RLock.
type acquireFunc func(ctx context.Context, opts ...fairlock.AcquireOption) (*fairlock.Lease, error)

func permits(s *fairlock.Semaphore, n int) acquireFunc {
	return func(ctx context.Context, opts ...fairlock.AcquireOption) (*fairlock.Lease, error) {
		return s.Acquire(ctx, n, opts...)
	}
}

// queueFor starts acquire in a goroutine and returns once the waiter is
// queued (acquire must pass on the options it is given), so that arrival
// order is certain.
func queueFor(t testing.TB, ctx context.Context, acquire acquireFunc, opts ...fairlock.AcquireOption) <-chan result {
	t.Helper()
	out := make(chan result, 1)
	queued := make(chan struct{})
	go func() {
		var once sync.Once
		s, err := acquire(ctx, append(opts, fairlock.OnQueued(func(int) { once.Do(func() { close(queued) }) }))...)
		out <- result{s, err}
	}()
	select {
	case <-queued:
	case r := <-out:
		t.Fatalf("Acquire returned before queueing: %v, %v", r.lease, r.err)
	case <-time.After(5 * time.Second):
		t.Fatal("waiter never queued")
	}
	return out
}

// notGranted fails if ch delivers within d: the waiter must still wait.
func notGranted(t testing.TB, ch <-chan result, d time.Duration, why string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: granted (%v, %v)", why, r.lease, r.err)
	case <-time.After(d):
	}
}

func mustSem(t testing.TB, l *fairlock.Locker, name string, capacity int) *fairlock.Semaphore {
	t.Helper()
	s, err := l.Semaphore(name, capacity)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustRW(t testing.TB, l *fairlock.Locker, name string) *fairlock.RWMutex {
	t.Helper()
	m, err := l.RWMutex(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// writerHolds tells whether a writer holds the read-write lock st shows.
func writerHolds(st fairlock.State) bool {
	return len(st.Holders) == 1 && !st.Holders[0].Shared
}

// hold takes a lease with acquire, within 5 s.
func hold(t testing.TB, acquire acquireFunc) *fairlock.Lease {
	t.Helper()
	s, err := acquire(withTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// publishCalls counts the PUBLISH commands Redis ran, scripts' included.
func publishCalls(t testing.TB, rdb *redis.Client) int {
	t.Helper()
	var calls int
	fmt.Sscanf(rdb.InfoMap(context.Background(), "commandstats").Val()["Commandstats"]["cmdstat_publish"], "calls=%d", &calls)
	return calls
}

// 4 Lockers × 4 goroutines ask for 1 to 3 of 4 permits, over and over:
// the permits held, counted as each lease starts and before it ends, never
// pass the capacity, and everyone is served. The TTLs are long: the count
// is right only while every lease is valid, and on a loaded machine a
// 1 s lease can be lost (rightly) between two renewals.
func TestSemaphoreCapacityNeverExceeded(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 30*time.Second)
	const capacity, lockers, goroutines = 4, 4, 4
	var inUse, most, grants atomic.Int64
	served := make([]atomic.Int64, lockers*goroutines)
	var wg sync.WaitGroup
	stop := time.Now().Add(2 * time.Second)
	for i := range lockers {
		l := newLocker(t, srv.Client(t), fairlock.WithLeaseTTL(10*time.Second), fairlock.WithWaiterTTL(3*time.Second))
		sem := mustSem(t, l, "cap", capacity)
		for g := range goroutines {
			wg.Add(1)
			go func(id int) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(id), 7))
				for time.Now().Before(stop) {
					n := 1 + rng.IntN(3)
					lease, err := sem.Acquire(ctx, n)
					if err != nil {
						t.Error(err)
						return
					}
					now := inUse.Add(int64(n))
					for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
					}
					time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
					inUse.Add(-int64(n))
					if err := lease.Release(ctx); err != nil {
						t.Error(err)
						return
					}
					grants.Add(1)
					served[id].Add(1)
				}
			}(i*goroutines + g)
		}
	}
	wg.Wait()
	t.Logf("%d grants, at most %d of %d permits in use at once", grants.Load(), most.Load(), capacity)
	if most.Load() > capacity {
		t.Fatalf("%d permits held at once, capacity %d", most.Load(), capacity)
	}
	for id := range served {
		if served[id].Load() == 0 {
			t.Fatalf("goroutine %d was never served", id)
		}
	}
}

// Grants follow arrival order, with weights, and the head of the queue
// blocks whoever is behind it, even a request that would fit.
func TestSemaphoreFIFOAndHeadOfLine(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 30*time.Second)
	sem := func() *fairlock.Semaphore { return mustSem(t, newLocker(t, srv.Client(t)), "fifo", 3) }
	full := hold(t, permits(sem(), 3))
	two := queueFor(t, ctx, permits(sem(), 2))
	one := queueFor(t, ctx, permits(sem(), 1))
	three := queueFor(t, ctx, permits(sem(), 3))
	small := queueFor(t, ctx, permits(sem(), 1))
	released(t, full)
	// 2 + 1 fit together: both granted by the one release.
	a, _ := await(t, two, handoff)
	b, _ := await(t, one, handoff)
	if b.Fence() <= a.Fence() {
		t.Fatalf("fences out of grant order: %d then %d", a.Fence(), b.Fence())
	}
	released(t, b)
	// One permit is free: the 1-permit request at the back would fit, but
	// the 3-permit one ahead of it waits, so it waits too.
	notGranted(t, small, heartbeat+slack, "a 1-permit request behind a waiting 3-permit one")
	released(t, a)
	c, _ := await(t, three, handoff)
	notGranted(t, small, heartbeat, "a request while the capacity is taken")
	released(t, c)
	d, _ := await(t, small, handoff)
	if !(c.Fence() > b.Fence() && d.Fence() > c.Fence()) {
		t.Fatalf("fences not in grant order: %d %d %d %d", a.Fence(), b.Fence(), c.Fence(), d.Fence())
	}
	released(t, d)
}

// A reader behind a waiting writer waits, though readers hold the lock; the
// run of readers behind the writer is granted together when it leaves, with
// one message per Locker, and fences follow grant order.
func TestRWMutexWritersAreNotStarved(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 30*time.Second)
	la, lb, lc := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	ma, mb, mc := mustRW(t, la, "rw"), mustRW(t, lb, "rw"), mustRW(t, lc, "rw")
	first := hold(t, ma.RLock)
	writer := queueFor(t, ctx, mb.Lock)
	late := queueFor(t, ctx, mc.RLock)
	notGranted(t, late, heartbeat+slack, "a reader behind a waiting writer")
	if st, err := ma.Inspect(ctx); err != nil || writerHolds(st) || len(st.Holders) != 1 || len(st.Waiters) != 2 {
		t.Fatalf("Inspect with a reader and two waiters: %+v, %v", st, err)
	}
	released(t, first)
	w, _ := await(t, writer, handoff)
	if w.Fence() <= first.Fence() {
		t.Fatalf("writer's fence %d not above the reader's %d", w.Fence(), first.Fence())
	}
	if st, _ := ma.Inspect(ctx); !writerHolds(st) || len(st.Holders) != 1 || len(st.Waiters) != 1 {
		t.Fatalf("Inspect with a writer: %+v", st)
	}
	// Four more readers from two Lockers queue behind the writer.
	readers := []<-chan result{late}
	for _, m := range []*fairlock.RWMutex{ma, ma, mc, mc} {
		readers = append(readers, queueFor(t, ctx, m.RLock))
	}
	before := publishCalls(t, rdb)
	released(t, w)
	var leases []*fairlock.Lease
	for _, r := range readers {
		s, _ := await(t, r, handoff)
		if s.Fence() <= w.Fence() {
			t.Fatalf("reader's fence %d not above the writer's %d", s.Fence(), w.Fence())
		}
		leases = append(leases, s)
	}
	if sent := publishCalls(t, rdb) - before; sent > 2 {
		t.Fatalf("one release granted readers of 2 Lockers with %d messages", sent)
	}
	if st, _ := ma.Inspect(ctx); writerHolds(st) || len(st.Holders) != 5 || len(st.Waiters) != 0 {
		t.Fatalf("Inspect with five readers: %+v", st)
	}
	if _, err := mb.TryLock(ctx); !errors.Is(err, fairlock.ErrNotAcquired) {
		t.Fatalf("TryLock while readers hold: %v", err)
	}
	r, err := mb.TryRLock(ctx)
	if err != nil {
		t.Fatalf("TryRLock among readers, nobody waiting: %v", err)
	}
	for _, s := range append(leases, r) {
		released(t, s)
	}
	x, err := mb.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock on a free lock: %v", err)
	}
	released(t, x)
}

// Try never jumps: it fails while anyone waits, though enough is free.
func TestKindsTryNeverJumpsTheQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	a, b := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	sa, sb := mustSem(t, a, "try", 2), mustSem(t, b, "try", 2)
	held := hold(t, permits(sa, 1))
	waiting := queueFor(t, ctx, permits(sb, 2))
	if _, err := sa.TryAcquire(ctx, 1); !errors.Is(err, fairlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire(1) with 1 free and a waiter queued: %v", err)
	}
	released(t, held)
	s, _ := await(t, waiting, handoff)
	released(t, s)

	ma, mb := mustRW(t, a, "try"), mustRW(t, b, "try")
	reader := hold(t, ma.RLock)
	writer := queueFor(t, ctx, mb.Lock)
	if _, err := ma.TryRLock(ctx); !errors.Is(err, fairlock.ErrNotAcquired) {
		t.Fatalf("TryRLock among readers with a writer queued: %v", err)
	}
	released(t, reader)
	s, _ = await(t, writer, handoff)
	if _, err := ma.TryRLock(ctx); !errors.Is(err, fairlock.ErrNotAcquired) {
		t.Fatalf("TryRLock while a writer holds: %v", err)
	}
	released(t, s)
}

// Processes must agree on a semaphore's capacity while it is in use; once
// idle, a new one takes effect.
func TestSemaphoreCapacityMismatch(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	a, b := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	three, five := mustSem(t, a, "agree", 3), mustSem(t, b, "agree", 5)
	held := hold(t, permits(three, 1))
	// Inspect counts holders within their deadline only: one whose deadline
	// passed, not reaped yet, is not in use.
	rdb := srv.Client(t)
	rdb.ZAdd(ctx, "fairlock:{agree}:sem:holders", redis.Z{Score: 1, Member: "expired-locker.1:1#2"})
	if st, err := three.Inspect(ctx); err != nil || st.InUse != 1 || len(st.Holders) != 1 {
		t.Fatalf("Inspect with an expired holder not yet reaped: %+v, %v", st, err)
	}
	rdb.ZRem(ctx, "fairlock:{agree}:sem:holders", "expired-locker.1:1#2")
	for _, try := range []bool{false, true} {
		var err error
		if try {
			_, err = five.TryAcquire(ctx, 1)
		} else {
			_, err = five.Acquire(ctx, 1)
		}
		if !errors.Is(err, fairlock.ErrInvalid) || !strings.Contains(err.Error(), "capacity 3") {
			t.Fatalf("a capacity of 5 while 3 is in use: %v, want ErrInvalid naming 3", err)
		}
	}
	if st, _ := three.Inspect(ctx); st.Capacity != 3 || st.InUse != 1 || len(st.Holders) != 1 || st.Fence != held.Fence() || len(st.Waiters) != 0 {
		t.Fatalf("the refused calls changed the semaphore: %+v", st)
	}
	released(t, held)
	if st, _ := three.Inspect(ctx); st.Capacity != 0 || st.InUse != 0 {
		t.Fatalf("idle semaphore: %+v", st)
	}
	all := hold(t, permits(five, 5))
	if st, _ := five.Inspect(ctx); st.Capacity != 5 || st.InUse != 5 {
		t.Fatalf("after the capacity changed while idle: %+v", st)
	}
	released(t, all)
}

// Bad arguments fail at once with ErrInvalid, and nothing reaches Redis.
// Kinds describes the kinds of lock as their handles behave: the
// capacity Inspect reports, the readers' sharing, the options taken, the
// holders' own fences.
func TestKindsDescribeEachKind(t *testing.T) {
	t.Parallel()
	want := []fairlock.KindInfo{
		{Lock: fairlock.LockMutex, Capacity: 1, Priorities: true},
		{Lock: fairlock.LockSemaphore, Groups: true, Priorities: true, HolderFences: true},
		{Lock: fairlock.LockRWMutex, Capacity: fairlock.MaxCapacity, Shared: true, HolderFences: true},
	}
	// A test of this package may add a kind after them (newcomer_test.go).
	if got := fairlock.Kinds(); len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
		t.Errorf("Kinds() = %+v, want %+v first", got, want)
	}
	for _, kd := range want {
		if got, err := kd.Lock.Info(); err != nil || got != kd {
			t.Errorf("%v.Info() = %+v, %v", kd.Lock, got, err)
		}
	}
}

func TestKindsBadInput(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := srv.Client(t)
	counter := &countCommands{}
	client.AddHook(counter)
	l := newLocker(t, client)
	ctx := withTimeout(t, 5*time.Second)
	for _, c := range []struct {
		name     string
		capacity int
	}{{"", 1}, {"x", 0}, {"x", -1}, {"x", fairlock.MaxCapacity + 1}, {strings.Repeat("n", fairlock.MaxNameLen+1), 1}} {
		if _, err := l.Semaphore(c.name, c.capacity); !errors.Is(err, fairlock.ErrInvalid) {
			t.Errorf("Semaphore(%.8q, %d): %v, want ErrInvalid", c.name, c.capacity, err)
		}
	}
	if _, err := l.RWMutex(""); !errors.Is(err, fairlock.ErrInvalid) {
		t.Errorf("RWMutex(\"\"): %v, want ErrInvalid", err)
	}
	sem := mustSem(t, l, "bad", 3)
	for _, n := range []int{0, -1, 4} {
		if _, err := sem.Acquire(ctx, n); !errors.Is(err, fairlock.ErrInvalid) {
			t.Errorf("Acquire(%d) of 3: %v, want ErrInvalid", n, err)
		}
		if _, err := sem.TryAcquire(ctx, n); !errors.Is(err, fairlock.ErrInvalid) {
			t.Errorf("TryAcquire(%d) of 3: %v, want ErrInvalid", n, err)
		}
	}
	if _, err := sem.Acquire(ctx, 1, fairlock.WithMetadata(strings.Repeat("m", fairlock.MaxMetadataLen+1))); !errors.Is(err, fairlock.ErrInvalid) {
		t.Errorf("Acquire with metadata too long: %v, want ErrInvalid", err)
	}
	if _, err := sem.Acquire(ctx, 1, nil); !errors.Is(err, fairlock.ErrInvalid) {
		t.Errorf("Acquire with a nil option: %v, want ErrInvalid", err)
	}
	if _, err := l.TryAcquire(ctx, "bad", fairlock.WithMetadata("m"), nil); !errors.Is(err, fairlock.ErrInvalid) {
		t.Errorf("mutex TryAcquire with a nil option: %v, want ErrInvalid", err)
	}
	if n := counter.n.Load(); n != 0 {
		t.Fatalf("bad input sent %d commands to Redis", n)
	}
}

// A cancelled waiter leaves no trace; one that stood at the head unblocks
// the request behind it, which fits.
func TestKindsCancellation(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	a, b, c := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	held := hold(t, permits(mustSem(t, a, "cancel", 3), 2))
	leaving, leave := context.WithCancel(ctx)
	big := queueFor(t, leaving, permits(mustSem(t, b, "cancel", 3), 3))
	small := queueFor(t, ctx, permits(mustSem(t, c, "cancel", 3), 1))
	notGranted(t, small, heartbeat, "a request behind a waiting larger one")
	leave()
	if r := <-big; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled Acquire: %v", r.err)
	}
	s, took := await(t, small, handoff)
	t.Logf("the request behind a cancelled head was granted %v later", took)
	released(t, s)
	released(t, held)
	if st, _ := mustSem(t, a, "cancel", 3).Inspect(ctx); st.Held() || len(st.Waiters) != 0 || st.Queued != 0 || st.Capacity != 0 || st.Fence != s.Fence() {
		t.Fatalf("after everyone left: %+v", st)
	}
}

// deadCountedWaiter queues a waiter whose Locker is gone (its session
// lives a waiter TTL more, and nobody renews it) in a semaphore's (space
// "sem") or read-write lock's ("rw") queue; token is its number and
// permits, after its session.
func deadCountedWaiter(t testing.TB, rdb *redis.Client, space, name, token string) string {
	t.Helper()
	ctx := context.Background()
	token = liveSession(t, rdb, "dead-"+space+"-"+strings.NewReplacer(":", "-", "#", "-").Replace(token)+".1", waiterTTL) + ":" + token
	base := "fairlock:{" + name + "}:" + space + ":"
	last, _ := rdb.ZRangeWithScores(ctx, base+"order", -1, -1).Result()
	order := 1.0
	if len(last) > 0 {
		order = last[0].Score + 1
	}
	rdb.RPush(ctx, base+"queue", token)
	rdb.ZAdd(ctx, base+"order", redis.Z{Score: order, Member: token})
	return token
}

// A holder that stops renewing gives its permits back within the lease TTL
// and a heartbeat; a dead waiter is passed over within the waiter TTL and a
// heartbeat, though it was granted.
func TestKindsDeadHoldersAndWaiters(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 30*time.Second)
	stale := newLocker(t, srv.Client(t), fairlock.WithAutoRenew(false))
	b := newLocker(t, srv.Client(t))
	old := hold(t, permits(mustSem(t, stale, "dead", 2), 2))
	start := time.Now()
	w := queueFor(t, ctx, permits(mustSem(t, b, "dead", 2), 1))
	bound := leaseTTL + heartbeat + slack
	s, _ := await(t, w, bound)
	t.Logf("permits of an unrenewed lease came back after %v (bound %v)", time.Since(start), bound)
	select {
	case <-old.Done():
	case <-time.After(heartbeat + slack):
		t.Fatal("the old holder was not told")
	}
	if err := old.Release(ctx); !errors.Is(err, fairlock.ErrNotHeld) {
		t.Fatalf("old holder's Release: %v", err)
	}

	// A dead writer at the head: the readers behind it wait for its grant
	// to expire, then share.
	deadCountedWaiter(t, rdb, "sem", "dead", "1#2")
	late := queueFor(t, ctx, permits(mustSem(t, b, "dead", 2), 2))
	released(t, s)
	bound = waiterTTL + heartbeat + slack
	s, took := await(t, late, bound)
	t.Logf("a dead waiter at the head was passed over after %v (bound %v)", took, bound)
	released(t, s)

	m := mustRW(t, b, "dead")
	reader := hold(t, m.RLock)
	deadCountedWaiter(t, rdb, "rw", "dead", fmt.Sprintf("2#%d", fairlock.MaxCapacity))
	// The second reader's Locker renews: stale's lease would lapse a lease
	// TTL after its grant, and the deferred Release may come later than
	// that on a loaded machine.
	readers := []<-chan result{queueFor(t, ctx, m.RLock), queueFor(t, ctx, mustRW(t, newLocker(t, srv.Client(t)), "dead").RLock)}
	released(t, reader)
	for _, r := range readers {
		s, took := await(t, r, bound)
		t.Logf("a reader behind a dead writer was granted after %v (bound %v)", took, bound)
		defer released(t, s)
	}
}

// Grants whose message was lost (the pub/sub connections killed) are found
// by the next heartbeat.
func TestKindsPubSubKill(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 30*time.Second)
	writer := hold(t, mustRW(t, newLocker(t, srv.Client(t)), "kill").Lock)
	var readers []<-chan result
	for range 4 {
		readers = append(readers, queueFor(t, ctx, mustRW(t, newLocker(t, srv.Client(t)), "kill").RLock))
	}
	if err := rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	released(t, writer)
	bound := heartbeat + slack
	for _, r := range readers {
		s, took := await(t, r, bound)
		t.Logf("reader granted %v after its pub/sub connection was killed (bound %v)", took, bound)
		defer released(t, s)
	}
}

// SCRIPT FLUSH costs nothing; after a restart the holder is told its lease
// is lost, the waiter is granted, and fences keep growing.
func TestKindsScriptFlushAndRestart(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 30*time.Second)
	sa, sb := mustSem(t, newLocker(t, srv.Client(t)), "restart", 2), mustSem(t, newLocker(t, srv.Client(t)), "restart", 2)
	held := hold(t, permits(sa, 2))
	w := queueFor(t, ctx, permits(sb, 1))
	rdb.ScriptFlush(ctx)
	time.Sleep(2 * heartbeat)
	if held.Err() != nil {
		t.Fatalf("lease lost after SCRIPT FLUSH: %v", held.Err())
	}
	released(t, held)
	held, _ = await(t, w, handoff)
	fence := held.Fence()
	w = queueFor(t, ctx, permits(sa, 2))
	srv.Restart(t)
	select {
	case <-held.Done():
	case <-time.After(2 * leaseTTL):
		t.Fatal("holder not told of the lease lost in the restart")
	}
	grantedAfterRestart(t, w, fence)
}

// While held and waited for, every key has a TTL; once everyone left, only
// the fence key is there, and the Lockers' sessions until they close.
func TestKindsKeysHaveTTLs(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 20*time.Second)
	a, b := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	held := []*fairlock.Lease{
		hold(t, permits(mustSem(t, a, "ttl", 2), 2)),
		hold(t, mustRW(t, a, "ttl").Lock),
	}
	waits := []<-chan result{
		queueFor(t, ctx, permits(mustSem(t, b, "ttl", 2), 1)),
		queueFor(t, ctx, mustRW(t, b, "ttl").RLock),
	}
	checkTTLs := func(when string) []string { return keysWithTTLs(t, ctx, rdb, when) }
	if keys := checkTTLs("held and waited for"); len(keys) < 12 {
		t.Fatalf("keys %q", keys)
	}
	time.Sleep(2 * heartbeat)
	checkTTLs("after heartbeats")
	for i, w := range waits {
		released(t, held[i])
		s, _ := await(t, w, handoff)
		released(t, s)
	}
	onlyFencesLeft(t, ctx, rdb, a, b)
}

// Close ends the waiters with ErrClosed and gives back every lease's
// permits.
func TestKindsClose(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	other := newLocker(t, srv.Client(t))
	l, err := fairlock.New(srv.Client(t), fairlock.WithLeaseTTL(leaseTTL), fairlock.WithWaiterTTL(waiterTTL))
	if err != nil {
		t.Fatal(err)
	}
	sem := mustSem(t, l, "close", 3)
	leases := []*fairlock.Lease{hold(t, permits(sem, 1)), hold(t, permits(sem, 1)), hold(t, mustRW(t, l, "close").RLock)}
	blocker := hold(t, mustRW(t, other, "close2").Lock)
	w := queueFor(t, ctx, mustRW(t, l, "close2").RLock)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if r := <-w; !errors.Is(r.err, fairlock.ErrClosed) {
		t.Fatalf("pending RLock after Close: %v", r.err)
	}
	for _, s := range leases {
		if !errors.Is(s.Err(), fairlock.ErrReleased) {
			t.Fatalf("lease after Close: %v", s.Err())
		}
	}
	if st, _ := mustSem(t, other, "close", 3).Inspect(ctx); st.InUse != 0 || st.Held() {
		t.Fatalf("semaphore after Close: %+v", st)
	}
	if st, _ := mustRW(t, other, "close2").Inspect(ctx); len(st.Waiters) != 0 || !writerHolds(st) {
		t.Fatalf("read-write lock after Close: %+v", st)
	}
	if _, err := sem.Acquire(ctx, 1); !errors.Is(err, fairlock.ErrClosed) {
		t.Fatalf("Acquire after Close: %v", err)
	}
	released(t, blocker)
}

// A mutex, a semaphore and a read-write lock of one name are independent,
// and events say which kind and how many permits.
func TestKindsAreIndependentAndObserved(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	var mu sync.Mutex
	var events []fairlock.Event
	l := newLocker(t, srv.Client(t), fairlock.WithObserver(func(e fairlock.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}))
	mutex := mustAcquire(t, l, "same")
	sem := hold(t, permits(mustSem(t, l, "same", 5), 3))
	writer := hold(t, mustRW(t, l, "same").Lock)
	for _, s := range []*fairlock.Lease{mutex, sem, writer} {
		if err := s.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]struct {
		lock    fairlock.LockKind
		permits int
	}{mutex.Token(): {fairlock.LockMutex, 1}, sem.Token(): {fairlock.LockSemaphore, 3}, writer.Token(): {fairlock.LockRWMutex, 1}}
	seen := 0
	for _, e := range events {
		if e.Kind != fairlock.EventGranted && e.Kind != fairlock.EventReleased {
			continue
		}
		seen++
		if w := want[e.Token]; e.Lock != w.lock || e.Permits != w.permits || e.Shared {
			t.Fatalf("%v of %s: lock %v permits %d, want %v %d", e.Kind, e.Token, e.Lock, e.Permits, w.lock, w.permits)
		}
	}
	if seen != 6 {
		t.Fatalf("%d grants and releases in %+v", seen, events)
	}
}

// Metadata goes with a semaphore's or read-write lock's waiter, then with
// its grant, and leaves with it; the hash always has a TTL.
func TestKindsMetadata(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 20*time.Second)
	a, b := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	fields := func(space string) []string {
		t.Helper()
		key := "fairlock:{meta}:" + space + ":meta"
		var keys *redis.StringSliceCmd
		var ttl *redis.DurationCmd
		rdb.TxPipelined(ctx, func(p redis.Pipeliner) error { //nolint:errcheck // each command's result is read below
			keys, ttl = p.HKeys(ctx, key), p.PTTL(ctx, key)
			return nil
		})
		if len(keys.Val()) > 0 && ttl.Val() <= 0 {
			t.Fatalf("%s metadata hash without a TTL (%v)", space, ttl.Val())
		}
		return keys.Val()
	}
	sem := mustSem(t, a, "meta", 2)
	held := hold(t, func(ctx context.Context, opts ...fairlock.AcquireOption) (*fairlock.Lease, error) {
		return sem.Acquire(ctx, 2, append(opts, fairlock.WithMetadata("export 1"))...)
	})
	w := queueFor(t, ctx, func(ctx context.Context, opts ...fairlock.AcquireOption) (*fairlock.Lease, error) {
		return mustSem(t, b, "meta", 2).Acquire(ctx, 1, append(opts, fairlock.WithMetadata("export 2"))...)
	})
	if got := fields("sem"); len(got) != 2 {
		t.Fatalf("metadata of a holder and a waiter: %q", got)
	}
	released(t, held)
	s, _ := await(t, w, handoff)
	if got := fields("sem"); len(got) != 1 || got[0] != s.Token() {
		t.Fatalf("after the grant: %q, want the new holder's %s", got, s.Token())
	}
	released(t, s)
	if got := fields("sem"); len(got) != 0 {
		t.Fatalf("after every release: %q", got)
	}

	rw := mustRW(t, a, "meta")
	r, err := rw.RLock(ctx, fairlock.WithMetadata("reader"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fields("rw"); len(got) != 1 || got[0] != r.Token() {
		t.Fatalf("a reader's metadata: %q", got)
	}
	released(t, r)
	if got := fields("rw"); len(got) != 0 {
		t.Fatalf("after the reader left: %q", got)
	}
}
