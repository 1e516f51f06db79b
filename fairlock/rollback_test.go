package fairlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Rollbacks: Redis answers writes, then loses them and serves what it had
// before, at the same address: a failover to a replica that missed them
// (replication stalled, the primary killed, the replica promoted), or a
// restart from an older snapshot (SAVE, more writes, SIGKILL, restart).

// A rollbackWorld is a Redis that can roll back: clients dial addr; mark
// is the moment it goes back to, roll loses what came after.
type rollbackWorld struct {
	addr       string
	mark, roll func()
	replicas   bool // it has a replica, for WithReplicaAck
}

var rollbackKinds = []struct {
	name  string
	start func(t *testing.T) rollbackWorld
}{
	{"failover", func(t *testing.T) rollbackWorld {
		p := redistest.StartPair(t)
		return rollbackWorld{addr: p.Proxy.Addr, mark: func() { p.Stall(t) }, roll: func() { p.Failover(t) }, replicas: true}
	}},
	{"snapshot", func(t *testing.T) rollbackWorld {
		srv := redistest.Start(t)
		return rollbackWorld{addr: srv.Addr, mark: func() { srv.Save(t) }, roll: func() { srv.RestartFromSnapshot(t) }}
	}},
}

func (w rollbackWorld) client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: w.addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// lostWithin fails unless s ends with ErrLost within bound.
func lostWithin(t testing.TB, s *fairlock.Lease, bound time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-s.Done():
		if !errors.Is(s.Err(), fairlock.ErrLost) {
			t.Errorf("%s ended with %v, want ErrLost", what, s.Err())
		}
	case <-time.After(bound):
		t.Errorf("%s still valid %v after the rollback: want ErrLost within %v", what, bound, bound)
	}
	return time.Since(start)
}

// Fences strictly increase across a rollback: a lease took lock "f" twice
// (fences n and n+1, the second held) after the moment Redis goes back
// to; the next grant, on the rolled-back Redis, gets a fence above both,
// and the holder of n+1 learns within a heartbeat that its grant is gone.
// A fence counter alone hands n out again: the rolled-back Redis has the
// older count.
func TestFencesGrowAcrossARollback(t *testing.T) {
	t.Parallel()
	for _, kind := range rollbackKinds {
		t.Run(kind.name, func(t *testing.T) {
			w := kind.start(t)
			ctx := withTimeout(t, 20*time.Second)
			l1 := newLocker(t, w.client(t))
			released(t, mustAcquire(t, l1, "f"))
			w.mark()
			released(t, mustAcquire(t, l1, "f"))
			held := mustAcquire(t, l1, "f")
			w.roll()
			rolled := time.Now()
			next, err := newLocker(t, w.client(t)).Acquire(ctx, "f")
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(rolled)
			lost := lostWithin(t, held, heartbeat+slack, "the lease whose grant the rollback lost")
			t.Logf("fence held before the rollback %d, next grant's %d (%v after it); the old holder lost its lease %v after it",
				held.Fence(), next.Fence(), took.Round(time.Millisecond), lost.Round(time.Millisecond))
			if next.Fence() <= held.Fence() {
				t.Fatalf("the grant after the rollback has fence %d, not above %d, handed out before it", next.Fence(), held.Fence())
			}
			released(t, next)
		})
	}
}

// A release lost in a rollback leaves no holder behind: L1 holds "y"
// throughout (its session lives, as a process with one Locker keeps it),
// and releases "x" to L2's waiter after the moment Redis goes back to. On
// the rolled-back Redis "x" is held by L1's released token. L1's next
// renewal finds that Redis lost writes it had answered, and gives its
// session up, which frees "x": its released token holds "x" no longer than
// two heartbeats after the rollback (the renewal that finds it, then a
// waiter's), where its record's TTL would hold it 30 lease TTLs. L1's
// other lease ends with ErrLost. L2's grant ends with ErrLost too, unless
// its token, queued again on the rolled-back Redis, was granted "x" anew
// before L2 looked (L1's renewal came first): then L2 holds "x" as it
// believes, which the test checks in Redis before releasing it.
func TestNoGhostHolderAfterARollback(t *testing.T) {
	t.Parallel()
	for _, kind := range rollbackKinds {
		for _, ack := range []bool{false, true} {
			name := kind.name
			if ack {
				name += "/replica-ack"
			}
			t.Run(name, func(t *testing.T) {
				w := kind.start(t)
				if ack && !w.replicas {
					t.Skip("no replica to acknowledge")
				}
				ctx := withTimeout(t, 20*time.Second)
				var opts []fairlock.Option
				if ack {
					// Long enough for a loaded machine's replica: WAIT
					// returns as soon as it acknowledges.
					opts = append(opts, fairlock.WithReplicaAck(1, 2*time.Second))
				}
				l1 := newLocker(t, w.client(t), opts...)
				y := mustAcquire(t, l1, "y")
				x := mustAcquire(t, l1, "x")
				waiting := queueBehind(t, ctx, newLocker(t, w.client(t)), "x")
				w.mark()
				released(t, x)
				handed, _ := await(t, waiting, handoff)
				w.roll()
				bound := 2*heartbeat + slack
				l3 := newLocker(t, w.client(t))
				next := make(chan result, 1)
				go func() {
					s, err := l3.Acquire(ctx, "x")
					next <- result{s, err}
				}()
				took := ghostGone(t, ctx, l3, x.Token(), bound+5*time.Second)
				lostY := lostWithin(t, y, heartbeat+slack, "L1's other lease")
				t.Logf("L1's released token held x %v after the rollback (bound %v); L1's other lease lost after %v",
					took.Round(time.Millisecond), bound, lostY.Round(time.Millisecond))
				if took > bound {
					t.Errorf("L1's released token held x %v after the rollback, past %v", took, bound)
				}
				select {
				case <-handed.Done():
				case <-time.After(heartbeat + slack):
					st, err := l3.Inspect(ctx, fairlock.LockMutex, "x")
					if err != nil || len(st.Holders) != 1 || st.Holders[0].Token != handed.Token() {
						t.Fatalf("L2's lost grant is valid %v after the rollback, and x is held by %+v (%v)", heartbeat+slack, st.Holders, err)
					}
					t.Logf("L2's token was granted x again on the rolled-back Redis")
					released(t, handed)
				}
				s, _ := await(t, next, heartbeat+slack)
				released(t, s)
			})
		}
	}
}

// ghostGone waits until the ghost token no longer holds "x", as l sees
// it, and returns how long that took.
func ghostGone(t *testing.T, ctx context.Context, l *fairlock.Locker, ghost string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < limit {
		st, err := l.Inspect(ctx, fairlock.LockMutex, "x")
		if err == nil && (len(st.Holders) == 0 || st.Holders[0].Token != ghost) {
			return time.Since(start)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the released token %s still holds x %v after the rollback", ghost, limit)
	return 0
}

// A waiter withdrawn before a rollback is not left queued by it: L1
// cancels its waiter on "q" after the moment Redis goes back to, while
// its session lives on. On the rolled-back Redis the token waits again; if
// nothing removed it, it would be granted "q" when its holder releases,
// and hold it for as long as L1 renews. L1 gives its session up instead.
func TestNoGhostWaiterAfterARollback(t *testing.T) {
	t.Parallel()
	for _, kind := range rollbackKinds {
		t.Run(kind.name, func(t *testing.T) {
			w := kind.start(t)
			ctx := withTimeout(t, 20*time.Second)
			holder := newLocker(t, w.client(t))
			h := mustAcquire(t, holder, "q")
			l1 := newLocker(t, w.client(t))
			keep := mustAcquire(t, l1, "keep")
			cctx, cancel := context.WithCancel(ctx)
			gone := queueBehind(t, cctx, l1, "q")
			w.mark()
			cancel()
			if r := <-gone; r.err == nil {
				t.Fatal("a cancelled Acquire returned a lease")
			}
			w.roll()
			rolled := time.Now()
			lostWithin(t, keep, heartbeat+slack, "L1's lease")
			// Once the holder's grant goes (its release; or the rollback lost
			// the holder's renewals too, and it gave its session up), a new
			// waiter is granted, not the withdrawn token.
			next := make(chan result, 1)
			l3 := newLocker(t, w.client(t))
			go func() {
				s, err := l3.Acquire(ctx, "q")
				next <- result{s, err}
			}()
			h.Release(ctx) //nolint:errcheck // ErrNotHeld if the holder's session went too
			bound := 2*heartbeat + slack
			s, took := await(t, next, bound)
			t.Logf("the new waiter was granted %v after the release, %v after the rollback", took.Round(time.Millisecond), time.Since(rolled).Round(time.Millisecond))
			released(t, s)
		})
	}
}

// Without a rollback, no session is given up for one: 8 goroutines of a
// fresh Locker (heartbeat 25 ms) open its session together (each request
// may open it) and cycle on mutexes and a semaphore, releasing and
// withdrawing as they go, for 1 s; the count their calls keep in Redis
// never falls behind the Locker's. That holds while the session lives in
// Redis: on a machine loaded enough that a renewal comes later than the
// lease TTL (75 ms), the session may expire and a late request that opens
// it make it anew with a count of 1, which the Locker rightly gives up,
// as it would a rollback. The test then says so and checks nothing.
func TestNoRollbackWithoutOne(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := srv.Client(t)
	renewals := &renewalSpan{}
	client.AddHook(renewals)
	var warnings, lost atomic.Int64
	obs := func(e fairlock.Event) {
		switch e.Kind {
		case fairlock.EventWarning:
			warnings.Add(1)
		case fairlock.EventLost:
			lost.Add(1)
		}
	}
	const ttl = 75 * time.Millisecond
	l := newLocker(t, client, fairlock.WithLeaseTTL(ttl), fairlock.WithWaiterTTL(ttl), fairlock.WithObserver(obs))
	sem, err := l.Semaphore("sem", 2)
	if err != nil {
		t.Fatal(err)
	}
	ctx := withTimeout(t, time.Second)
	var wg sync.WaitGroup
	var cycles atomic.Int64
	for i := range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond) // some give up while queued
				var s *fairlock.Lease
				var err error
				if i%2 == 0 {
					s, err = l.Acquire(cctx, fmt.Sprintf("m%d", i%3))
				} else {
					s, err = sem.Acquire(cctx, 1)
				}
				cancel()
				if err == nil {
					s.Release(context.Background()) //nolint:errcheck // counted by the observer if lost
					cycles.Add(1)
				}
			}
		})
	}
	wg.Wait()
	widest := renewals.widest()
	t.Logf("%d cycles, %d warnings, %d leases lost; renewals at most %v apart (send to the next one's reply)", cycles.Load(), warnings.Load(), lost.Load(), widest.Round(time.Millisecond))
	if widest >= ttl {
		t.Logf("a renewal came %v after the one before, past the lease TTL: the session may have expired, and the check does not hold", widest.Round(time.Millisecond))
		return
	}
	if warnings.Load() != 0 {
		t.Fatalf("%d warnings without a rollback (a session given up for one)", warnings.Load())
	}
}

// A withdrawal that overtakes the request that would open its session
// counts itself in a mark that lives the lease TTL; the session may open
// later than that (the request was never sent, and the next comes a while
// after), and the count with it must not then fall short of what the
// Locker counted, or the first renewal takes it for a rollback.
func TestEarlyWithdrawalKeepsTheCount(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var warnings atomic.Int64
	const ttl = 100 * time.Millisecond
	l := newLocker(t, srv.Client(t), fairlock.WithLeaseTTL(ttl), fairlock.WithObserver(func(e fairlock.Event) {
		if e.Kind == fairlock.EventWarning {
			warnings.Add(1)
		}
	}))
	ctx := withTimeout(t, 10*time.Second)
	if err := fairlock.WithdrawBeforeOpening(ctx, l, "early", "never-sent"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * ttl) // the mark, and the count in it, expire
	s := mustAcquire(t, l, "early")
	time.Sleep(3 * l.Heartbeat())
	if warnings.Load() != 0 || s.Err() != nil {
		t.Fatalf("a withdrawal before the session opened: %d warnings, lease %v", warnings.Load(), s.Err())
	}
	released(t, s)
}

// A request that opens a session may reach Redis after another opened it
// and a release counted itself there (a batch whose reply timed out, with
// its request delayed in the network, and the calls after it): it must not
// start the count again, or the next renewal takes the shortfall for a
// rollback and gives the session up. The late opening is sent as the
// network would deliver it, after the session's first cycle.
func TestLateOpeningKeepsTheCount(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var warnings atomic.Int64
	l := newLocker(t, srv.Client(t), fairlock.WithObserver(func(e fairlock.Event) {
		if e.Kind == fairlock.EventWarning {
			warnings.Add(1)
		}
	}))
	ctx := withTimeout(t, 10*time.Second)
	released(t, mustAcquire(t, l, "late")) // opens the session, and counts a release
	s := mustAcquire(t, l, "late")
	if err := fairlock.LateOpening(ctx, l, srv.Client(t), "late", "late-copy"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * l.Heartbeat())
	if warnings.Load() != 0 || s.Err() != nil {
		t.Fatalf("a late opening of the session: %d warnings, lease %v", warnings.Load(), s.Err())
	}
	released(t, s)
}

// renewalSpan records, on a Locker's client, the longest span from one
// renewal's send to the next one's reply: while it is shorter than the
// lease TTL, no session of that Locker's expired in Redis.
type renewalSpan struct {
	mu       sync.Mutex
	lastSent time.Time
	longest  time.Duration
}

func (h *renewalSpan) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *renewalSpan) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *renewalSpan) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		sent := time.Now()
		err := next(ctx, cmds)
		if !slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return len(c.Args()) > 1 && c.Args()[1] == renewSHA && c.Err() == nil }) {
			return err
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if !h.lastSent.IsZero() {
			h.longest = max(h.longest, time.Since(h.lastSent))
		}
		h.lastSent = sent
		return err
	}
}

func (h *renewalSpan) widest() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.longest
}

// A count Redis keeps above its Locker's hides no rollback: L1 holds "keep"
// and "x"; its renewals reach Redis twice (each copy counted there, not
// by L1, as a renewal whose reply was lost is) dups times; a snapshot is
// taken; an operator releases "x", L1 finds it lost (its heartbeat reads
// the record back, or its Release finds nothing held) and withdraws its
// token (counted); Redis restarts from the snapshot, with x's record back.
// Measured against its own count alone, L1 took the surplus for the lost
// withdrawal, and its renewals kept the ghost holding "x" (with dups=6,
// still there 0.7 s later, with no warning). It measures against what its
// last renewal found, and gives the session up.
func TestSurplusCountHidesNoRollback(t *testing.T) {
	t.Parallel()
	for _, how := range []struct {
		dups    int
		release bool
	}{{0, false}, {6, false}, {0, true}, {6, true}} {
		dups := how.dups
		t.Run(fmt.Sprintf("dups=%d,release=%v", dups, how.release), func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			px := redistest.StartProxy(t, srv.Addr)
			c := redis.NewClient(&redis.Options{Addr: px.Addr})
			t.Cleanup(func() { c.Close() })
			ctx := withTimeout(t, 20*time.Second)
			var warnings atomic.Int64
			l1 := newLocker(t, c, fairlock.WithObserver(func(e fairlock.Event) {
				if e.Kind == fairlock.EventWarning {
					warnings.Add(1)
				}
			}))
			keep := mustAcquire(t, l1, "keep")
			x := mustAcquire(t, l1, "x")
			for range dups {
				h := px.Duplicate(renewSHA)
				select {
				case <-h.Caught():
				case <-time.After(2 * heartbeat):
					t.Fatal("no renewal to duplicate")
				}
				h.Release()
			}
			time.Sleep(heartbeat / 2) // the copies land
			srv.Save(t)
			admin := newLocker(t, srv.Client(t))
			if _, err := admin.ForceRelease(ctx, fairlock.LockMutex, "x", x.Token()); err != nil {
				t.Fatal(err)
			}
			if how.release {
				if err := x.Release(ctx); !errors.Is(err, fairlock.ErrNotHeld) {
					t.Fatalf("Release of a lease released by force: %v, want ErrNotHeld", err)
				}
			}
			lostWithin(t, x, heartbeat+slack, "x, released by force")
			// Its withdrawal is answered: sent in the heartbeat that found
			// the loss, or in the next after Release's.
			settle := 50 * time.Millisecond
			if how.release {
				settle += heartbeat
			}
			time.Sleep(settle)
			srv.RestartFromSnapshot(t)
			// The renewal that finds the loss, then the deletion of the session.
			time.Sleep(2*heartbeat + slack)
			st, err := admin.Inspect(ctx, fairlock.LockMutex, "x")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("after the rollback: holders of x %+v; keep valid: %v; warnings: %d", st.Holders, keep.Err() == nil, warnings.Load())
			if len(st.Holders) == 1 && st.Holders[0].Token == x.Token() {
				t.Errorf("x is held by %s (TTL %v), a lease its Locker reported lost (%v), %v after the rollback; L1's session lives on (keep valid: %v, warnings %d)",
					x.Token(), st.Holders[0].TTL, x.Err(), 2*heartbeat+slack, keep.Err() == nil, warnings.Load())
			}
		})
	}
}
