package fairlock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Tests of priorities (WithPriority, WithPriorityAging): a waiter of higher
// priority passes every waiter of lower priority, aging bounds every wait,
// the head-of-line rule holds across priorities, groups share within a
// priority, and the faults of the other tests.

// priorityKinds are the locks that take priorities: a mutex and a
// semaphore of one permit, each Acquire of the Locker l on the lock name.
func priorityKinds(t testing.TB) map[string]func(l *fairlock.Locker, name string) acquireFunc {
	return map[string]func(l *fairlock.Locker, name string) acquireFunc{
		"mutex": func(l *fairlock.Locker, name string) acquireFunc {
			return func(ctx context.Context, opts ...fairlock.AcquireOption) (*fairlock.Lease, error) {
				return l.Acquire(ctx, name, opts...)
			}
		},
		"semaphore": func(l *fairlock.Locker, name string) acquireFunc {
			return groupPermits(mustSem(t, l, name, 1), 1, "")
		},
	}
}

// at gives acquire priority p.
func at(acquire acquireFunc, p int) acquireFunc {
	return func(ctx context.Context, opts ...fairlock.AcquireOption) (*fairlock.Lease, error) {
		return acquire(ctx, append(opts, fairlock.WithPriority(p))...)
	}
}

// 1. A priority-9 request that arrives behind 100 queued priority-0
// requests is granted at the next release; the 100 then follow in arrival
// order.
func TestPriorityPassesBacklog(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for kind, acquireOf := range priorityKinds(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := withTimeout(t, 60*time.Second)
			var lockers []acquireFunc
			for range 4 {
				lockers = append(lockers, acquireOf(newLocker(t, srv.Client(t)), "backlog-"+kind))
			}
			holder := hold(t, lockers[0])
			var backlog []<-chan result
			for i := range 100 {
				backlog = append(backlog, queueFor(t, ctx, lockers[i%4]))
			}
			urgent := queueFor(t, ctx, at(lockers[1], 9))
			released(t, holder)
			s, took := await(t, urgent, handoff)
			t.Logf("the priority-9 request behind 100 was granted %v after the release", took.Round(time.Millisecond))
			if s.Fence() <= holder.Fence() {
				t.Fatalf("fence %d not above the holder's %d", s.Fence(), holder.Fence())
			}
			notGranted(t, backlog[0], 2*heartbeat, "the first priority-0 waiter while the priority-9 one holds")
			released(t, s)
			last := s.Fence()
			// 100 grants in turn: each within the README's bound for a
			// grant whose message is lost (a heartbeat), and slack.
			for i, ch := range backlog {
				s, _ := await(t, ch, heartbeat+slack)
				if s.Fence() <= last {
					t.Fatalf("waiter %d: fence %d, not above the one before, %d", i, s.Fence(), last)
				}
				last = s.Fence()
				released(t, s)
			}
		})
	}
}

// 2. With an aging of 200 ms and a stream of priority-9 requests that never
// lets up, a priority-0 request is granted within 9 × 200 ms and its FIFO
// bound: once it reaches level 9, it ranks above every priority-9 request
// that came after it, and the stream's waiters that came before it were
// granted long before (a few 2 ms holds each). The bound's margin: one
// hold, and slack for the release and the grant's message.
func TestPriorityAging(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const aging = 200 * time.Millisecond
	for kind, acquireOf := range priorityKinds(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := withTimeout(t, 30*time.Second)
			name := "aging-" + kind
			stream := at(acquireOf(newLocker(t, srv.Client(t), fairlock.WithPriorityAging(aging)), name), 9)
			var grants atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			const workers, holdFor = 6, 2 * time.Millisecond
			for range workers {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						s, err := stream(ctx)
						if err != nil {
							t.Errorf("priority 9: %v", err)
							return
						}
						grants.Add(1)
						time.Sleep(holdFor)
						released(t, s)
					}
				})
			}
			defer wg.Wait()
			defer close(stop)
			time.Sleep(100 * time.Millisecond) // the stream flows
			low := acquireOf(newLocker(t, srv.Client(t), fairlock.WithPriorityAging(aging)), name)
			before := grants.Load()
			start := time.Now()
			ch := queueFor(t, ctx, low)
			bound := 9*aging + holdFor + slack
			s, _ := await(t, ch, bound)
			passed := grants.Load() - before
			t.Logf("priority 0 granted after %v (aging bound %v, test bound %v); %d priority-9 grants passed it meanwhile",
				(time.Since(start)).Round(time.Millisecond), 9*aging, bound, passed)
			if passed < 20 {
				t.Errorf("only %d priority-9 grants while it waited: the stream let up, and the test proves nothing", passed)
			}
			released(t, s)
		})
	}
}

// 3. The head-of-line rule holds across priorities: when the waiter to be
// granted next does not fit, nobody is granted, not even a later waiter of
// lower priority that would fit.
func TestPriorityHeadOfLine(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	sem := mustSem(t, newLocker(t, srv.Client(t)), "hol", 4)
	other := mustSem(t, newLocker(t, srv.Client(t)), "hol", 4)
	holder := hold(t, func(ctx context.Context, opts ...fairlock.AcquireOption) (*fairlock.Lease, error) {
		return sem.Acquire(ctx, 3, opts...)
	})
	big := queueFor(t, ctx, func(ctx context.Context, opts ...fairlock.AcquireOption) (*fairlock.Lease, error) {
		return other.Acquire(ctx, 2, append(opts, fairlock.WithPriority(9))...)
	})
	small := queueFor(t, ctx, groupPermits(other, 1, ""))
	notGranted(t, small, 2*heartbeat, "a priority-0 request of 1 permit behind a priority-9 request of 2, with 1 free")
	released(t, holder)
	sb, _ := await(t, big, handoff)
	ss, _ := await(t, small, handoff)
	if ss.Fence() <= sb.Fence() {
		t.Errorf("the small request's fence %d is not above the big one's %d", ss.Fence(), sb.Fence())
	}
	released(t, sb)
	released(t, ss)
}

// 4. Priorities with groups: within a priority, groups share as without
// priorities (a quiet tenant's one request is granted second, not behind a
// noisy tenant's backlog), and every request of priority 5 is granted
// before any of priority 0.
func TestPriorityWithGroups(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 30*time.Second)
	sems := []*fairlock.Semaphore{mustSem(t, newLocker(t, srv.Client(t)), "mixed", 1), mustSem(t, newLocker(t, srv.Client(t)), "mixed", 1)}
	holder := hold(t, groupPermits(sems[0], 1, ""))
	type waiting struct {
		label string
		ch    <-chan result
	}
	var all []waiting
	queue := func(label string, s *fairlock.Semaphore, group string, p int) {
		all = append(all, waiting{label, queueFor(t, ctx, at(groupPermits(s, 1, group), p))})
	}
	for range 6 {
		queue("noisy-5", sems[0], "noisy", 5)
	}
	queue("plain-0", sems[1], "", 0)
	queue("tenant-0", sems[1], "tenant", 0)
	queue("quiet-5", sems[1], "quiet", 5)
	released(t, holder)
	grants := map[int64]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, w := range all {
		wg.Go(func() {
			s, _ := await(t, w.ch, 10*slack)
			mu.Lock()
			grants[s.Fence()] = w.label
			mu.Unlock()
			released(t, s)
		})
	}
	wg.Wait()
	order := groupOrder(grants)
	t.Logf("grant order: %v", order)
	if len(order) != len(all) {
		t.Fatalf("%d grants, want %d", len(order), len(all))
	}
	if i := slices.Index(order, "quiet-5"); i > 1 {
		t.Errorf("the quiet tenant's request was grant %d, want 1 or 2: %v", i+1, order)
	}
	for _, late := range order[len(order)-2:] {
		if late != "plain-0" && late != "tenant-0" {
			t.Errorf("a priority-5 request among the last two grants: %v", order)
		}
	}
}

// 5. TryAcquire takes a priority: it never waits and never passes a
// waiter, and the holder's priority shows in Inspect.
func TestPriorityTry(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 10*time.Second)
	l, other := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	s, err := l.TryAcquire(ctx, "try", fairlock.WithPriority(7))
	if err != nil {
		t.Fatal(err)
	}
	st, err := l.Inspect(ctx, fairlock.LockMutex, "try")
	if err != nil || len(st.Holders) != 1 || st.Holders[0].Priority != 7 {
		t.Fatalf("Inspect of a priority-7 holder: %+v, %v", st, err)
	}
	waiter := queueBehind(t, ctx, other, "try")
	if _, err := other.TryAcquire(ctx, "try", fairlock.WithPriority(9)); !errors.Is(err, fairlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire at priority 9 while held, with a waiter: %v, want ErrNotAcquired", err)
	}
	released(t, s)
	w, _ := await(t, waiter, handoff)
	released(t, w)
}

// 6. Inspect lists the waiters of priorities above 0 first, and shows each
// waiter's priority; the events carry it.
func TestPriorityInspect(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 10*time.Second)
	var mu sync.Mutex
	priorities := map[fairlock.EventKind][]int{}
	l := newLocker(t, srv.Client(t), fairlock.WithObserver(func(e fairlock.Event) {
		mu.Lock()
		priorities[e.Kind] = append(priorities[e.Kind], e.Priority)
		mu.Unlock()
	}))
	sem := mustSem(t, l, "inspect", 2)
	holder := hold(t, groupPermits(sem, 2, ""))
	chans := []<-chan result{
		queueFor(t, ctx, groupPermits(sem, 1, "tenant-a")),
		queueFor(t, ctx, at(groupPermits(sem, 1, "tenant-a"), 3)),
		queueFor(t, ctx, at(groupPermits(sem, 1, ""), 8)),
	}
	st, err := sem.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, w := range st.Waiters {
		got = append(got, w.Priority)
	}
	if !slices.Equal(got, []int{3, 8, 0}) {
		t.Errorf("waiters' priorities in Inspect's order: %v, want [3 8 0] (priorities above 0 first, in arrival order)", got)
	}
	released(t, holder)
	groupDrain(t, ctx, 3*slack, chans...)
	mu.Lock()
	defer mu.Unlock()
	if q := priorities[fairlock.EventEnqueued]; !slices.Equal(q, []int{0, 3, 8}) {
		t.Errorf("EventEnqueued priorities %v, want [0 3 8]", q)
	}
}

// 7. A dead holder of priority 9 and dead waiters of priorities 9, 4 and 0:
// the holder's grant ends within a lease TTL and a heartbeat, and goes to
// the live waiter of the highest priority, passing the dead ones; the
// other live waiters follow by priority.
func TestPriorityDeadParties(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for kind, acquireOf := range priorityKinds(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := withTimeout(t, 30*time.Second)
			name := "dead-" + kind
			dead := srv.Client(t)
			deadLock := acquireOf(newLocker(t, dead), name)
			holder := hold(t, at(deadLock, 9))
			for _, p := range []int{9, 4, 0} {
				queueFor(t, ctx, at(deadLock, p))
			}
			live := acquireOf(newLocker(t, srv.Client(t)), name)
			zero := queueFor(t, ctx, live)
			low := queueFor(t, ctx, at(live, 2))
			high := queueFor(t, ctx, at(live, 6))
			dead.Close()
			start := time.Now()
			bound := leaseTTL + heartbeat + slack
			s, _ := await(t, high, bound)
			t.Logf("a dead priority-9 holder's lock came back %v after its client closed (bound %v), to the live priority-6 waiter", time.Since(start).Round(time.Millisecond), bound)
			if s.Fence() <= holder.Fence() {
				t.Errorf("fence %d not above the dead holder's %d", s.Fence(), holder.Fence())
			}
			last := s.Fence()
			released(t, s)
			for _, ch := range []<-chan result{low, zero} {
				s, _ = await(t, ch, heartbeat+slack)
				if s.Fence() <= last {
					t.Errorf("fence %d not above the one before, %d: not in priority order", s.Fence(), last)
				}
				last = s.Fence()
				released(t, s)
			}
		})
	}
}

// 8. SCRIPT FLUSH with waiters of three priorities costs nothing and
// keeps their order; after a Redis restart every live waiter is granted
// in time.
func TestPriorityScriptFlushAndRestart(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 60*time.Second)
	l := newLocker(t, srv.Client(t))
	holder := mustAcquire(t, l, "flush")
	var chans []<-chan result
	for _, p := range []int{0, 3, 9} {
		chans = append(chans, queueBehind(t, ctx, l, "flush", fairlock.WithPriority(p)))
	}
	rdb.ScriptFlush(ctx)
	time.Sleep(2 * heartbeat)
	released(t, holder)
	var fences []int64
	for _, i := range []int{2, 1, 0} {
		s, _ := await(t, chans[i], heartbeat+slack)
		fences = append(fences, s.Fence())
		released(t, s)
	}
	if !slices.IsSorted(fences) {
		t.Errorf("after SCRIPT FLUSH, priorities 9, 3, 0 were granted fences %v, not in that order", fences)
	}

	holder = mustAcquire(t, l, "flush")
	chans = chans[:0]
	for _, p := range []int{0, 5, 9} {
		chans = append(chans, queueBehind(t, ctx, l, "flush", fairlock.WithPriority(p)))
	}
	restarted := time.Now()
	srv.Restart(t)
	select {
	case <-holder.Done():
	case <-time.After(2 * leaseTTL):
		t.Fatal("holder not told of the lease lost in the restart")
	}
	bound := waiterTTL + 2*heartbeat + 3*slack
	groupDrain(t, ctx, bound, chans...)
	t.Logf("after a Redis restart, 3 waiters of priorities 0, 5, 9 were granted within %v of the kill (bound %v)", time.Since(restarted).Round(time.Millisecond), bound)
}

// 9. With waiters of several priorities, in groups and not, every key has
// a TTL; once everyone left, only the fence keys remain.
func TestPriorityKeysHaveTTLs(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 20*time.Second)
	a, b := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	semA, semB := groupSem(t, a, "ttl", 2, 2), groupSem(t, b, "ttl", 2, 2)
	held := []*fairlock.Lease{hold(t, groupPermits(semA, 1, "tenant-a")), hold(t, groupPermits(semA, 1, ""))}
	muHeld := mustAcquire(t, a, "ttl-mutex")
	waits := []<-chan result{
		queueFor(t, ctx, at(groupPermits(semB, 1, ""), 4)),
		queueFor(t, ctx, at(groupPermits(semB, 1, "tenant-a"), 4)),
		queueFor(t, ctx, at(groupPermits(semB, 2, "tenant-b"), 9)),
		queueFor(t, ctx, groupPermits(semB, 1, "tenant-c")),
		queueBehind(t, ctx, b, "ttl-mutex", fairlock.WithPriority(1)),
		queueBehind(t, ctx, b, "ttl-mutex"),
	}
	keys := keysWithTTLs(t, ctx, rdb, "held and waited for")
	for _, want := range []string{"fairlock:{ttl}:sem:groups:4", "fairlock:{ttl}:sem:gq4:tenant-a", "fairlock:{ttl}:sem:queue:4",
		"fairlock:{ttl}:sem:gq9:tenant-b", "fairlock:{ttl-mutex}:queue:1"} {
		if !slices.Contains(keys, want) {
			t.Errorf("no key %s among %q", want, keys)
		}
	}
	time.Sleep(2 * heartbeat)
	keysWithTTLs(t, ctx, rdb, "after heartbeats")
	for _, s := range append(held, muHeld) {
		released(t, s)
	}
	groupDrain(t, ctx, heartbeat+6*slack, waits...)
	onlyFencesLeft(t, ctx, rdb, a, b)
}

// 10. Bad priorities and agings fail at once with ErrInvalid.
func TestPriorityBadInput(t *testing.T) {
	t.Parallel()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never reached
	defer client.Close()
	for _, d := range []time.Duration{0, -time.Second, time.Microsecond} {
		if _, err := fairlock.New(client, fairlock.WithPriorityAging(d)); !errors.Is(err, fairlock.ErrInvalid) {
			t.Errorf("WithPriorityAging(%v): %v, want ErrInvalid", d, err)
		}
	}
	l, err := fairlock.New(client)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	for _, p := range []int{-1, fairlock.MaxPriority + 1} {
		if _, err := l.Acquire(ctx, "x", fairlock.WithPriority(p)); !errors.Is(err, fairlock.ErrInvalid) {
			t.Errorf("WithPriority(%d): %v, want ErrInvalid", p, err)
		}
	}
	rw, err := l.RWMutex("x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.Lock(ctx, fairlock.WithPriority(1)); !errors.Is(err, fairlock.ErrInvalid) {
		t.Errorf("a read-write lock with a priority: %v, want ErrInvalid", err)
	}
}

// 11. A clock set back never puts a waiter of a priority above 0 before
// one of its lane that came earlier, even while waiters of priority 0
// (whose last arrival is what a request reads first) wait: miniredis,
// whose TIME the test sets.
func TestPriorityArrivalsWithClockSetBack(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer c.Close()
	l := newLocker(t, c)
	ctx := withTimeout(t, 10*time.Second)
	t0 := time.Now()
	mr.SetTime(t0)
	held := mustAcquire(t, l, "clock")
	plain := queueBehind(t, ctx, l, "clock")
	first := queueBehind(t, ctx, l, "clock", fairlock.WithPriority(4))
	mr.SetTime(t0.Add(-10 * time.Second))
	second := queueBehind(t, ctx, l, "clock", fairlock.WithPriority(4))
	order := c.ZRangeWithScores(ctx, "fairlock:{clock}:order", 0, -1).Val()
	if len(order) != 3 || order[0].Score >= order[1].Score || order[1].Score >= 0 || order[2].Score < 0 {
		t.Fatalf("order set after the clock went back: %v (want the two of priority 4 first, in arrival order, below 0)", order)
	}
	released(t, held)
	for _, ch := range []<-chan result{first, second, plain} {
		s, _ := await(t, ch, heartbeat+slack)
		released(t, s)
	}
}
