package fairlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/fairlock/fairlock/scripts"
	"github.com/redis/go-redis/v9"
)

// Short TTLs, as tests and latency-sensitive users run them.
const (
	leaseTTL  = time.Second
	waiterTTL = 600 * time.Millisecond
	heartbeat = 200 * time.Millisecond // min(leaseTTL, waiterTTL)/3
)

// slack absorbs scheduling and round trips in the bounds below; it is not a
// speed claim.
const slack = 300 * time.Millisecond

// handoff bounds a grant that a release or a withdrawal makes: its message
// wakes the waiter at once, and if that message is late or lost the next
// heartbeat finds the grant. A bound of slack alone counted on the message
// arriving: CI with -race and a busy core saw a grant later than 300 ms.
const handoff = heartbeat + slack

func newLocker(t testing.TB, c redis.UniversalClient, opts ...fairlock.Option) *fairlock.Locker {
	t.Helper()
	opts = append([]fairlock.Option{fairlock.WithLeaseTTL(leaseTTL), fairlock.WithWaiterTTL(waiterTTL)}, opts...)
	l, err := fairlock.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// released releases s, and fails the test if that fails.
func released(t testing.TB, s *fairlock.Lease) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Release(ctx); err != nil {
		t.Errorf("Release of %s: %v", s.Token(), err)
	}
}

func withTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// queueBehind starts Acquire in a goroutine and returns once the waiter is
// queued, so that arrival order is certain. The lease (or error) arrives on
// the returned channel.
func queueBehind(t testing.TB, ctx context.Context, l *fairlock.Locker, name string, opts ...fairlock.AcquireOption) <-chan result {
	t.Helper()
	return queueFor(t, ctx, func(ctx context.Context, more ...fairlock.AcquireOption) (*fairlock.Lease, error) {
		return l.Acquire(ctx, name, append(more, opts...)...)
	})
}

type result struct {
	lease *fairlock.Lease
	err   error
}

func await(t testing.TB, ch <-chan result, bound time.Duration) (*fairlock.Lease, time.Duration) {
	t.Helper()
	start := time.Now()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("Acquire: %v", r.err)
		}
		return r.lease, time.Since(start)
	case <-time.After(bound):
		t.Fatalf("no grant within %v", bound)
	}
	return nil, 0
}

func mustAcquire(t testing.TB, l *fairlock.Locker, name string, opts ...fairlock.AcquireOption) *fairlock.Lease {
	t.Helper()
	s, err := l.Acquire(withTimeout(t, 5*time.Second), name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestFIFOAcrossLockers(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 30*time.Second)
	const n = 24
	holder := mustAcquire(t, newLocker(t, srv.Client(t)), "fifo")
	var mu sync.Mutex
	var order []int
	chans := make([]<-chan result, n)
	for i := range n {
		chans[i] = queueBehind(t, ctx, newLocker(t, srv.Client(t)), "fifo")
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := <-chans[i]
			if r.err != nil {
				t.Error(r.err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			released(t, r.lease)
		}()
	}
	released(t, holder)
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("grant order %v, want arrival order 0..%d", order, n-1)
		}
	}
	if len(order) != n {
		t.Fatalf("%d of %d waiters granted", len(order), n)
	}
}

func TestMutualExclusionAndFences(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 60*time.Second)
	const lockers, goroutines, rounds = 4, 4, 15
	var mu sync.Mutex
	var lastFence int64
	var wg sync.WaitGroup
	for range lockers {
		l := newLocker(t, srv.Client(t))
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					err := l.Do(ctx, "counter", func(ctx context.Context) error {
						// An unguarded read-modify-write: lost updates if two hold at once.
						v, err := rdb.Get(ctx, "count").Int()
						if err != nil && !errors.Is(err, redis.Nil) {
							return err
						}
						time.Sleep(time.Millisecond)
						return rdb.Set(ctx, "count", v+1, 0).Err()
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	// Fences, checked from a separate Locker taking turns in the same queue.
	l := newLocker(t, srv.Client(t))
	for range rounds {
		s := mustAcquire(t, l, "counter")
		mu.Lock()
		if s.Fence() <= lastFence {
			t.Errorf("fence %d after %d", s.Fence(), lastFence)
		}
		lastFence = s.Fence()
		mu.Unlock()
		released(t, s)
	}
	wg.Wait()
	if got, want := rdb.Get(ctx, "count").Val(), fmt.Sprint(lockers*goroutines*rounds); got != want {
		t.Fatalf("counter %s, want %s: two holders overlapped", got, want)
	}
}

func TestFencesStrictlyIncrease(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 30*time.Second)
	l1, l2 := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	var last int64
	for i := range 200 {
		l := l1
		if i%2 == 1 {
			l = l2
		}
		s := mustAcquire(t, l, "fence")
		if s.Fence() <= last {
			t.Fatalf("grant %d: fence %d not above %d", i, s.Fence(), last)
		}
		last = s.Fence()
		if i == 100 {
			// Redis loses everything; fences must still grow.
			rdb.FlushAll(ctx)
			if err := s.Release(ctx); !errors.Is(err, fairlock.ErrNotHeld) {
				t.Fatalf("Release after FLUSHALL: %v, want ErrNotHeld", err)
			}
			continue
		}
		released(t, s)
	}
}

func TestTryAcquireNeverJumpsTheQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 20*time.Second)
	a, b, c := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	if _, err := c.TryAcquire(ctx, ""); !errors.Is(err, fairlock.ErrInvalid) {
		t.Fatalf("empty name: %v", err)
	}
	held, err := a.TryAcquire(ctx, "try")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryAcquire(ctx, "try"); !errors.Is(err, fairlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held lock: %v", err)
	}
	waiting := queueBehind(t, ctx, b, "try")
	// The holder's lease vanishes with nobody releasing: the lock is free
	// but b waits. TryAcquire must hand it to b, not take it.
	rdb.Del(ctx, "fairlock:{try}:lock")
	if _, err := c.TryAcquire(ctx, "try"); !errors.Is(err, fairlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire with a waiter queued: %v", err)
	}
	s, _ := await(t, waiting, 2*time.Second)
	if h := holderOf(t, c, "try"); h != s.Token() {
		t.Fatalf("holder %q, want the waiter %q", h, s.Token())
	}
	released(t, s)
	<-held.Done()
	if !errors.Is(held.Err(), fairlock.ErrLost) {
		t.Fatalf("first holder's Err = %v, want ErrLost", held.Err())
	}
}

func TestCancelledWaiterLeavesAtOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	a, b, c := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	held := mustAcquire(t, a, "cancel")
	bctx, cancelB := context.WithCancel(ctx)
	bw := queueBehind(t, bctx, b, "cancel")
	cw := queueBehind(t, ctx, c, "cancel")
	cancelB()
	r := <-bw
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled Acquire: %v, want context.Canceled", r.err)
	}
	if st, _ := a.Inspect(ctx, fairlock.LockMutex, "cancel"); len(st.Waiters) != 1 {
		t.Fatalf("%d waiters after cancel, want 1", len(st.Waiters))
	}
	released(t, held)
	s, took := await(t, cw, handoff)
	t.Logf("next waiter granted %v after release, past a cancelled one", took)
	released(t, s)
}

// deadWaiter puts a waiter in the queue whose process is gone: its
// session lives a waiter TTL more, and nobody renews it. It returns its
// token.
func deadWaiter(t testing.TB, rdb *redis.Client, name string, n int) string {
	t.Helper()
	ctx := context.Background()
	session := liveSession(t, rdb, fmt.Sprintf("dead-locker-%d.1", n), waiterTTL)
	token := session + ":1"
	last, err := rdb.ZRangeWithScores(ctx, "fairlock:{"+name+"}:order", -1, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	order := 1.0
	if len(last) > 0 {
		order = last[0].Score + 1
	}
	rdb.RPush(ctx, "fairlock:{"+name+"}:queue", token)
	rdb.ZAdd(ctx, "fairlock:{"+name+"}:order", redis.Z{Score: order, Member: token})
	return token
}

// positions records what OnPosition reports to one waiter.
type positions struct {
	mu  sync.Mutex
	got []int
}

func (p *positions) record(pos int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, pos)
}

func (p *positions) last() (int, []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.got) == 0 {
		return 0, nil
	}
	return p.got[len(p.got)-1], append([]int(nil), p.got...)
}

// waitPosition waits until p last reported want.
func waitPosition(t *testing.T, p *positions, want int, bound time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < bound {
		if got, _ := p.last(); got == want {
			return time.Since(start)
		}
		time.Sleep(5 * time.Millisecond)
	}
	_, all := p.last()
	t.Fatalf("position never reached %d within %v; reported %v", want, bound, all)
	return 0
}

func TestPositionsFollowTheQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 20*time.Second)
	var observed positions // c's observer sees the same moves as EventMoved
	a, b := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	c := newLocker(t, srv.Client(t), fairlock.WithObserver(func(e fairlock.Event) {
		if e.Kind == fairlock.EventMoved {
			observed.record(e.Position)
		}
	}))
	held := mustAcquire(t, a, "pos")
	deadWaiter(t, rdb, "pos", 1)
	var pb, pc positions
	queue := func(l *fairlock.Locker, p *positions) <-chan result {
		out := make(chan result, 1)
		go func() {
			s, err := l.Acquire(ctx, "pos", fairlock.OnPosition(p.record))
			out <- result{s, err}
		}()
		return out
	}
	first := queue(b, &pb)
	waitPosition(t, &pb, 2, time.Second)
	second := queue(c, &pc)
	waitPosition(t, &pc, 3, time.Second)

	// The dead waiter ahead of both drops out of the count once its
	// deadline passes, wherever it stands: no grant is needed for that.
	bound := waiterTTL + 2*heartbeat + slack
	took := waitPosition(t, &pc, 2, bound)
	waitPosition(t, &pb, 1, heartbeat+slack)
	t.Logf("a dead waiter ahead left the count after %v (bound %v)", took, bound)

	released(t, held)
	s, _ := await(t, first, handoff)
	took = waitPosition(t, &pc, 1, 2*heartbeat+slack)
	t.Logf("the next waiter heard it is next %v after the grant ahead of it (bound %v)", took, 2*heartbeat+slack)
	released(t, s)
	s, _ = await(t, second, handoff)
	released(t, s)
	if _, all := pb.last(); !slices.Equal(all, []int{2, 1}) {
		t.Errorf("first waiter's positions %v, want [2 1]", all)
	}
	if _, all := pc.last(); !slices.Equal(all, []int{3, 2, 1}) {
		t.Errorf("second waiter's positions %v, want [3 2 1]", all)
	}
	if _, all := observed.last(); !slices.Equal(all, []int{2, 1}) {
		t.Errorf("second waiter's EventMoved positions %v, want [2 1]", all)
	}
}

func TestDeadWaitersLoseTheirPlace(t *testing.T) {
	t.Parallel()
	for _, where := range []string{"head", "middle"} {
		t.Run(where, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client(t)
			ctx := withTimeout(t, 20*time.Second)
			a, b, c := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
			held := mustAcquire(t, a, "dead")
			var first <-chan result
			if where == "middle" {
				first = queueBehind(t, ctx, b, "dead")
			}
			deadWaiter(t, rdb, "dead", 1)
			last := queueBehind(t, ctx, c, "dead")
			released(t, held)
			if first != nil {
				s, _ := await(t, first, handoff)
				released(t, s)
			}
			// The dead waiter is granted (it was alive a moment ago) and then
			// must lose the lock within the waiter TTL.
			bound := waiterTTL + heartbeat + slack
			s, took := await(t, last, bound)
			t.Logf("dead waiter at the %s skipped after %v (bound %v)", where, took, bound)
			released(t, s)
		})
	}
}

func TestHolderThatStopsRenewing(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	a := newLocker(t, srv.Client(t), fairlock.WithAutoRenew(false))
	b := newLocker(t, srv.Client(t))
	held := mustAcquire(t, a, "stale")
	start := time.Now()
	w := queueBehind(t, ctx, b, "stale")
	bound := leaseTTL + heartbeat + slack
	s, _ := await(t, w, bound)
	t.Logf("next waiter granted %v after an unrenewed lease began (bound %v)", time.Since(start), bound)
	mustBeLost(t, ctx, b, held, s)
	released(t, s)
}

// mustBeLost checks what a holder sees once another was granted its lock:
// its lease ends within a heartbeat with ErrLost, its Release and Extend
// return ErrNotHeld, and they leave the new holder alone.
func mustBeLost(t testing.TB, ctx context.Context, l *fairlock.Locker, old, current *fairlock.Lease) {
	t.Helper()
	select {
	case <-old.Done():
	case <-time.After(heartbeat + slack):
		t.Fatal("the old holder was not told within a heartbeat")
	}
	if !errors.Is(old.Err(), fairlock.ErrLost) {
		t.Fatalf("old lease's Err = %v, want ErrLost", old.Err())
	}
	if err := old.Release(ctx); !errors.Is(err, fairlock.ErrNotHeld) {
		t.Fatalf("old holder's Release: %v, want ErrNotHeld", err)
	}
	if err := old.Extend(ctx, time.Second); !errors.Is(err, fairlock.ErrNotHeld) {
		t.Fatalf("old holder's Extend: %v, want ErrNotHeld", err)
	}
	if h := holderOf(t, l, old.Name()); h != current.Token() {
		t.Fatalf("the old holder's calls changed the new holder: %q", h)
	}
}

// holderOf is the token that holds the mutex called name, "" if none.
func holderOf(t testing.TB, l *fairlock.Locker, name string) string {
	t.Helper()
	st, err := l.Inspect(context.Background(), fairlock.LockMutex, name)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Held() {
		return ""
	}
	return st.Holders[0].Token
}

func TestAutoRenewKeepsTheLease(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	a, b := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	held := mustAcquire(t, a, "renew")
	w := queueBehind(t, ctx, b, "renew")
	time.Sleep(3 * leaseTTL)
	if held.Err() != nil {
		t.Fatalf("renewed lease ended: %v", held.Err())
	}
	select {
	case r := <-w:
		t.Fatalf("waiter granted while the lease was renewed: %v", r.err)
	default:
	}
	released(t, held)
	s, _ := await(t, w, handoff)
	released(t, s)
}

func TestPubSubKillDoesNotStrandWaiters(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 30*time.Second)
	a := newLocker(t, srv.Client(t))
	held := mustAcquire(t, a, "kill")
	var ws []<-chan result
	for range 5 {
		ws = append(ws, queueBehind(t, ctx, newLocker(t, srv.Client(t)), "kill"))
	}
	for i, w := range ws {
		if err := rdb.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
			t.Fatal(err)
		}
		released(t, held)
		bound := heartbeat + slack
		s, took := await(t, w, bound)
		t.Logf("waiter %d granted %v after its pub/sub connection was killed (bound %v)", i, took, bound)
		held = s
	}
	released(t, held)
}

func TestLeaseLossIsSignalled(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 20*time.Second)
	l := newLocker(t, srv.Client(t))
	err := l.Do(ctx, "lost", func(ctx context.Context) error {
		rdb.Set(ctx, "fairlock:{lost}:lock", "someone-else", time.Minute)
		select {
		case <-ctx.Done():
			if !errors.Is(context.Cause(ctx), fairlock.ErrLost) {
				t.Errorf("cause %v, want ErrLost", context.Cause(ctx))
			}
			return ctx.Err()
		case <-time.After(heartbeat + slack):
			t.Error("Do's context not cancelled after the lease was lost")
			return nil
		}
	})
	if !errors.Is(err, fairlock.ErrLost) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Do: %v, want ErrLost joined with fn's error", err)
	}
	if v := rdb.Get(ctx, "fairlock:{lost}:lock").Val(); v != "someone-else" {
		t.Fatalf("the new holder's lock was changed to %q", v)
	}
}

func TestScriptFlushAndRestart(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 30*time.Second)
	a, b := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	held := mustAcquire(t, a, "restart")
	w := queueBehind(t, ctx, b, "restart")
	rdb.ScriptFlush(ctx)
	time.Sleep(2 * heartbeat) // heartbeats must reload their script
	if held.Err() != nil {
		t.Fatalf("lease lost after SCRIPT FLUSH: %v", held.Err())
	}
	released(t, held)
	held, _ = await(t, w, handoff)
	fence := held.Fence()

	w = queueBehind(t, ctx, a, "restart")
	srv.Restart(t)
	select {
	case <-held.Done():
	case <-time.After(2 * leaseTTL):
		t.Fatal("holder not told of the lease lost in the restart")
	}
	if !errors.Is(held.Err(), fairlock.ErrLost) {
		t.Fatalf("Err = %v, want ErrLost", held.Err())
	}
	grantedAfterRestart(t, w, fence)
}

func TestCloseEndsWaitersAndReleases(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	other := newLocker(t, srv.Client(t))
	l, err := fairlock.New(srv.Client(t), fairlock.WithLeaseTTL(leaseTTL), fairlock.WithWaiterTTL(waiterTTL))
	if err != nil {
		t.Fatal(err)
	}
	held := mustAcquire(t, l, "close-a")
	blocker := mustAcquire(t, other, "close-b")
	w := queueBehind(t, ctx, l, "close-b")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if r := <-w; !errors.Is(r.err, fairlock.ErrClosed) {
		t.Fatalf("pending Acquire after Close: %v", r.err)
	}
	if !errors.Is(held.Err(), fairlock.ErrReleased) {
		t.Fatalf("held lease after Close: %v", held.Err())
	}
	for _, name := range []string{"close-a", "close-b"} {
		st, _ := other.Inspect(ctx, fairlock.LockMutex, name)
		if len(st.Waiters) != 0 || (name == "close-a" && st.Held()) {
			t.Fatalf("%s after Close: %+v", name, st)
		}
	}
	if _, err := l.Acquire(ctx, "close-a"); !errors.Is(err, fairlock.ErrClosed) {
		t.Fatalf("Acquire after Close: %v", err)
	}
	released(t, blocker)
}

func TestEveryKeyHasATTL(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 20*time.Second)
	a, b := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	names := []string{"plain", "a{b}c", "{}", "a:b c", "\xff\xfe", "%7B", "{"}
	var waits []<-chan result
	for _, name := range names {
		mustAcquire(t, a, name, fairlock.WithMetadata("holder of "+name))
		waits = append(waits, queueBehind(t, ctx, b, name, fairlock.WithMetadata("waiter on "+name)))
	}
	keys := rdb.Keys(ctx, "*").Val()
	for _, k := range keys {
		if ttl := rdb.PTTL(ctx, k).Val(); ttl <= 0 {
			t.Errorf("key %q has no TTL (%v)", k, ttl)
		}
	}
	if len(keys) < 5*len(names) {
		t.Fatalf("%d keys for %d locks: names collided", len(keys), len(names))
	}
	a.Close()
	for _, w := range waits {
		s, _ := await(t, w, handoff)
		released(t, s)
	}
	b.Close()
	time.Sleep(10 * time.Millisecond)
	for _, k := range rdb.Keys(ctx, "*").Val() {
		if !isFence(k) {
			t.Errorf("key %q left after every lock was released", k)
		}
	}
}

// keysWithTTLs returns the keys under the default prefix, and fails t for
// any that has no TTL.
func keysWithTTLs(t testing.TB, ctx context.Context, rdb *redis.Client, when string) []string {
	t.Helper()
	var keys []string
	iter := rdb.Scan(ctx, 0, "fairlock:*", 100).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if ttl := rdb.PTTL(ctx, k).Val(); ttl <= 0 {
			t.Errorf("%s: key %q has no TTL (%v)", when, k, ttl)
		}
	}
	return keys
}

// onlyFencesLeft checks, once everyone left, that only fence keys and the
// sessions of lockers are left, and once they closed, only fence keys.
func onlyFencesLeft(t testing.TB, ctx context.Context, rdb *redis.Client, lockers ...*fairlock.Locker) {
	t.Helper()
	for _, k := range keysWithTTLs(t, ctx, rdb, "after everyone left") {
		if !isFence(k) && !isSession(k) {
			t.Errorf("key %q left behind", k)
		}
	}
	for _, l := range lockers {
		l.Close()
	}
	for _, k := range keysWithTTLs(t, ctx, rdb, "after the Lockers closed") {
		if !isFence(k) {
			t.Errorf("key %q left behind", k)
		}
	}
}

// grantedAfterRestart awaits w's grant after a Redis restart, within the
// bound a waiter has then, with a fence above the one before.
func grantedAfterRestart(t testing.TB, w <-chan result, fence int64) {
	t.Helper()
	bound := waiterTTL + 2*heartbeat + slack
	s, took := await(t, w, bound)
	t.Logf("after a Redis restart, the waiter was granted in %v (bound %v)", took, bound)
	if s.Fence() <= fence {
		t.Fatalf("fence %d after restart, not above %d", s.Fence(), fence)
	}
	released(t, s)
}

func isFence(k string) bool { return strings.HasSuffix(k, ":fence") }

func isSession(k string) bool { return strings.HasPrefix(k, "fairlock:session:") }

func TestHeartbeatIsBatched(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 30*time.Second)
	// A holder whose heartbeat (20 s) does not come in the test, so that
	// only the waiters' Locker calls Redis.
	mustAcquire(t, newLocker(t, srv.Client(t), fairlock.WithLeaseTTL(time.Minute), fairlock.WithWaiterTTL(time.Minute), fairlock.WithAutoRenew(false)), "many")
	// A waiter TTL of 9 s leaves room for a machine loaded by the other
	// packages' tests: a waiter whose session lapsed would queue anew with
	// a call of its own, and 1,000 waiters queueing at once crowd the
	// client pool. (At 1.5 s, a loaded run saw 1,381 calls in 4 periods;
	// at 3 s, a CI run with -race and a core kept busy saw 2,030 in 3.)
	l := newLocker(t, srv.Client(t), fairlock.WithLeaseTTL(time.Minute), fairlock.WithWaiterTTL(9*time.Second))
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	const n = 1000
	queued := make(chan struct{}, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.Acquire(wctx, "many", fairlock.OnQueued(func(int) { queued <- struct{}{} }))
		}()
	}
	for range n {
		<-queued
	}
	before := evalCalls(t, rdb)
	const periods = 3
	time.Sleep(periods * l.Heartbeat())
	calls := evalCalls(t, rdb) - before
	t.Logf("%d waiters on one Locker: %d script calls in %d heartbeat periods", n, calls, periods)
	// Each period, one heartbeat.lua call and the session's renewal
	// (renew.lua).
	if calls > 2*periods+2 {
		t.Fatalf("%d script calls for %d periods: heartbeats are not batched", calls, periods)
	}
	cancel()
	wg.Wait()
}

func evalCalls(t testing.TB, rdb *redis.Client) int {
	info := rdb.InfoMap(context.Background(), "commandstats").Val()["Commandstats"]
	n := 0
	for _, cmd := range []string{"cmdstat_evalsha", "cmdstat_eval"} {
		var calls int
		fmt.Sscanf(info[cmd], "calls=%d", &calls)
		n += calls
	}
	return n
}

func TestReplicaAck(t *testing.T) {
	t.Parallel()
	primary := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", fmt.Sprint(primary.Port))
	ctx := withTimeout(t, 20*time.Second)
	rc := replica.Client(t)
	for !strings.Contains(rc.Info(ctx, "replication").Val(), "master_link_status:up") {
		time.Sleep(20 * time.Millisecond)
	}
	l := newLocker(t, primary.Client(t), fairlock.WithReplicaAck(1, time.Second))
	s, err := l.Acquire(ctx, "acked")
	if err != nil {
		t.Fatalf("one replica acknowledging: %v", err)
	}
	if v := rc.Get(ctx, "fairlock:{acked}:lock").Val(); v != s.Token() {
		t.Fatalf("replica has %q, want the grant %q", v, s.Token())
	}
	released(t, s)

	greedy := newLocker(t, primary.Client(t), fairlock.WithReplicaAck(2, 50*time.Millisecond))
	if _, err := greedy.Acquire(ctx, "acked"); !errors.Is(err, fairlock.ErrNotReplicated) {
		t.Fatalf("two replicas wanted, one present: %v", err)
	}
	if h := holderOf(t, l, "acked"); h != "" {
		t.Fatalf("an unreplicated grant was kept: %q", h)
	}
}

// liveWaiter queues a waiter whose session lives an hour, of a Locker
// that never checks on it: it stays at the head until granted. It returns
// its token.
func liveWaiter(t testing.TB, rdb *redis.Client, name string, n int) string {
	t.Helper()
	ctx := context.Background()
	token := liveSession(t, rdb, fmt.Sprintf("live-locker-%d.1", n), time.Hour) + ":1"
	last, _ := rdb.ZRangeWithScores(ctx, "fairlock:{"+name+"}:order", -1, -1).Result()
	order := 1.0
	if len(last) > 0 {
		order = last[0].Score + 1
	}
	rdb.RPush(ctx, "fairlock:{"+name+"}:queue", token)
	rdb.ZAdd(ctx, "fairlock:{"+name+"}:order", redis.Z{Score: order, Member: token})
	return token
}

// The fast path takes a free lock with one pipeline, but a free lock that
// waiters are queued for (its holder expired unreleased, before any
// heartbeat granted it) goes to them, from TryAcquire and Acquire alike.
func TestFastPathNeverJumpsTheQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 10*time.Second)
	head := liveWaiter(t, rdb, "fast", 1)
	if _, err := newLocker(t, srv.Client(t)).TryAcquire(ctx, "fast"); !errors.Is(err, fairlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a free lock with a waiter queued: %v, want ErrNotAcquired", err)
	}
	if h := holderOf(t, newLocker(t, srv.Client(t)), "fast"); h != head {
		t.Fatalf("after the fast path found a waiter: held by %q; want %s", h, head)
	}
	rdb.Del(ctx, "fairlock:{fast}:lock")
	next := liveWaiter(t, rdb, "fast", 2)
	out := make(chan result, 1)
	go func() {
		s, err := newLocker(t, srv.Client(t)).Acquire(ctx, "fast")
		out <- result{s, err}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		h := holderOf(t, newLocker(t, srv.Client(t)), "fast")
		if h == next {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Acquire's fast path did not hand the lock to the waiter ahead: held by %q", h)
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case r := <-out:
		t.Fatalf("Acquire returned %v ahead of a live waiter", r.err)
	case <-time.After(2 * heartbeat):
	}
}

// A lease taken on the fast path is released by release_fast.lua while
// nobody waits. When another Locker's waiter queued meanwhile, that
// release changes nothing and release.lua hands the lock on: the waiter
// holds it when Release returns, not at its next heartbeat. The later
// turns, which the first Locker takes knowing the lock busy, go to
// release.lua at once.
func TestFastReleaseHandsOnToWaiters(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	a, b := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	for turn := range 3 {
		held := mustAcquire(t, a, "handon")
		waiting := queueBehind(t, ctx, b, "handon")
		released(t, held)
		if h := holderOf(t, a, "handon"); h == "" {
			t.Fatalf("turn %d: the lock was free after the release, with a waiter queued", turn)
		}
		next, _ := await(t, waiting, heartbeat)
		released(t, next)
		if h := holderOf(t, a, "handon"); h != "" {
			t.Fatalf("turn %d: held by %q after every lease was released", turn, h)
		}
	}
}

// A lease that waited in the queue goes to release.lua at once, however
// long it was held: others likely wait behind it, and release_fast.lua
// would only find them and cost the hand-off a round trip. Here it is held
// past its Locker's busy mark (a heartbeat), with a waiter behind it; a
// proxy in front of its Locker catches any release_fast.lua it sends.
func TestQueuedLeaseReleasesInOneCall(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	px := redistest.StartProxy(t, srv.Addr)
	a, c := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	bClient := redis.NewClient(&redis.Options{Addr: px.Addr})
	t.Cleanup(func() { bClient.Close() })
	b := newLocker(t, bClient)
	first := mustAcquire(t, a, "queued")
	waitingB := queueBehind(t, ctx, b, "queued")
	released(t, first)
	held, _ := await(t, waitingB, heartbeat)
	waitingC := queueBehind(t, ctx, c, "queued")
	time.Sleep(b.Heartbeat() + slack)

	fast := px.HoldRequest(redis.NewScript(scripts.ReleaseFast).Hash())
	defer fast.Release()
	done := make(chan error, 1)
	go func() { done <- held.Release(ctx) }()
	select {
	case <-fast.Caught():
		fast.Release()
		t.Errorf("a queued lease's release went to release_fast.lua first")
	case err := <-done:
		done <- err
	}
	if err := <-done; err != nil {
		t.Fatalf("Release: %v", err)
	}
	next, _ := await(t, waitingC, heartbeat)
	released(t, next)
}

// A free lock whose queue holds only dead entries is free for TryAcquire:
// the fast path hands it to the queue, which frees it, and the script then
// grants it.
func TestTryAcquireOverDeadEntries(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 10*time.Second)
	goneWaiter(t, rdb, "", "deadonly")
	s, err := newLocker(t, srv.Client(t)).TryAcquire(ctx, "deadonly")
	if err != nil {
		t.Fatalf("TryAcquire of a free lock with only a dead entry queued: %v", err)
	}
	released(t, s)
}

// Fences come from the clock: a counter far behind it (set by hand, or
// left by a Redis that lost its data) gives way to the server's time in
// µs; a counter lost while the lock is held still gives the next grant a
// higher fence; and the fast path draws a fence only for a grant it made,
// none when it finds the lock taken. The key always has a TTL.
func TestFencesFollowTheClock(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 10*time.Second)
	const key = "fairlock:{clock}:fence"
	rdb.Set(ctx, key, 41, 0)
	a := newLocker(t, srv.Client(t))
	before := time.Now().UnixMicro()
	held := mustAcquire(t, a, "clock")
	if held.Fence() < before {
		t.Fatalf("fence %d of a grant over a counter at 41: want at least the clock, %d", held.Fence(), before)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 {
		t.Fatalf("fence key after a grant: PTTL %v, want a TTL", ttl)
	}
	drawn := rdb.Get(ctx, key).Val()
	if _, err := newLocker(t, srv.Client(t)).TryAcquire(ctx, "clock"); !errors.Is(err, fairlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held lock: %v", err)
	}
	if now := rdb.Get(ctx, key).Val(); now != drawn {
		t.Fatalf("a fast path that found the lock taken drew a fence: %s, then %s", drawn, now)
	}
	rdb.Del(ctx, key) // lost while the lock is held
	w := queueBehind(t, ctx, newLocker(t, srv.Client(t)), "clock")
	released(t, held)
	next, _ := await(t, w, handoff)
	if next.Fence() <= held.Fence() {
		t.Fatalf("fence after the loss %d, before it %d: want it higher", next.Fence(), held.Fence())
	}
	released(t, next)
}
