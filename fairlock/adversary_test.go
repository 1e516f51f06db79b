package fairlock_test

// The promises as a hostile network and an uneven fleet test them: a
// Locker with shorter TTLs than the others on the same lock, a grant that
// comes while renewals stall, a Redis out of memory, a request that reaches
// Redis after its own cancel, a waiter that dies as it is granted, Close
// with Redis gone, and TTLs too long to count. Each test failed on the
// engine before the rules of docs/design.md ("What keeps a party alive")
// were written down and followed.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/fairlock/fairlock/scripts"
	"github.com/redis/go-redis/v9"
)

// renewSHA names a session's renewal (renew.lua) in the requests.
var renewSHA = redis.NewScript(scripts.Renew).Hash()

// A Locker whose TTLs are far shorter than the others' scans the queue for
// dead waiters and writes it anew: the queue must keep the longer TTL, so
// that the waiters of the other Lockers keep their places and FIFO holds.
func TestShortTTLLockerKeepsTheQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 40*time.Second)
	long := func() *fairlock.Locker {
		return newLocker(t, srv.Client(t), fairlock.WithLeaseTTL(3*time.Second), fairlock.WithWaiterTTL(3*time.Second))
	}
	h, a, c := long(), long(), long()
	const shortTTL = 150 * time.Millisecond // its keys live 30 × 150 ms = 4.5 s
	b := newLocker(t, srv.Client(t), fairlock.WithLeaseTTL(shortTTL), fairlock.WithWaiterTTL(shortTTL))
	held := mustAcquire(t, h, "uneven")
	first := queueBehind(t, ctx, a, "uneven")
	// A's heartbeat makes the keys live its 90 s now, and not again for
	// another 30 s.
	time.Sleep(1500 * time.Millisecond)
	// Ten waiters of a process that died: enough for the scan to write the
	// queue anew rather than remove them one by one.
	for i := range 10 {
		deadWaiter(t, rdb, "uneven", i)
	}
	// The short Locker tries the lock for longer than its own keys' TTL,
	// scanning the queue on the way; it must never get it while A waits.
	for end := time.Now().Add(30*shortTTL + time.Second); time.Now().Before(end); {
		if s, err := b.TryAcquire(ctx, "uneven"); err == nil {
			released(t, s)
			t.Fatal("TryAcquire took the lock while a live waiter was queued")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ttl := rdb.PTTL(ctx, "fairlock:{uneven}:queue").Val(); ttl < 30*time.Second {
		t.Errorf("the queue's TTL is %v after the short Locker's scans, want at least the long Lockers' (90 s) less what passed", ttl)
	}
	later := queueBehind(t, ctx, c, "uneven")
	released(t, held)
	s, took := await(t, first, 3*time.Second)
	t.Logf("the waiter that queued first was granted %v after the release", took)
	notGranted(t, later, 50*time.Millisecond, "the later waiter must wait for the first")
	released(t, s)
	s, _ = await(t, later, handoff)
	released(t, s)
}

// stallHook holds back every pipeline that renews a session, once stalled,
// until its context ends: the connection that carries a Locker's renewals
// stalls while its other calls go through.
type stallHook struct {
	stalled atomic.Bool
	mu      sync.Mutex
	last    time.Time // when the last renewal that went through was sent
}

func (h *stallHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *stallHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *stallHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		renewal := len(cmds) > 0 && len(cmds[0].Args()) > 1 && cmds[0].Args()[1] == renewSHA
		if renewal && h.stalled.Load() {
			<-ctx.Done()
			for _, cmd := range cmds {
				cmd.SetErr(ctx.Err()) // as go-redis reports a pipeline that failed
			}
			return ctx.Err()
		}
		sent := time.Now()
		err := next(ctx, cmds)
		if renewal && err == nil {
			h.mu.Lock()
			h.last = sent
			h.mu.Unlock()
		}
		return err
	}
}

func (h *stallHook) lastRenewal() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

// A grant that reaches a waiter whose renewals have stalled near their
// local deadline must not outlive the session Redis has: the waiter's lease
// ends before anyone else is granted.
func TestGrantWhileRenewalsStall(t *testing.T) {
	t.Parallel()
	const ttl = 600 * time.Millisecond // a heartbeat of 200 ms, a margin of 60 ms
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	hook := &stallHook{}
	ca := srv.Client(t)
	ca.AddHook(hook)
	opts := []fairlock.Option{fairlock.WithLeaseTTL(ttl), fairlock.WithWaiterTTL(ttl)}
	h, a := newLocker(t, srv.Client(t), opts...), newLocker(t, ca, opts...)
	// B looks every 25 ms: it is granted as soon as Redis lets A's grant go.
	b := newLocker(t, srv.Client(t), fairlock.WithLeaseTTL(75*time.Millisecond), fairlock.WithWaiterTTL(75*time.Millisecond))
	held := mustAcquire(t, h, "stall")
	first := queueBehind(t, ctx, a, "stall")
	second := queueBehind(t, ctx, b, "stall")
	// Stall A's renewals just after one went through, and release the lock
	// two thirds of a TTL later: A's grant comes 200 ms before its local
	// deadline, within a heartbeat of it.
	for last := hook.lastRenewal(); hook.lastRenewal() == last; {
		time.Sleep(time.Millisecond)
	}
	hook.stalled.Store(true)
	renewed := hook.lastRenewal()
	time.Sleep(time.Until(renewed.Add(2 * ttl / 3)))
	// B's grant is timed as it comes, whatever A is doing.
	type grant struct {
		lease *fairlock.Lease
		at    time.Time
	}
	bGranted := make(chan grant, 1)
	go func() {
		r := <-second
		bGranted <- grant{r.lease, time.Now()}
	}()
	released(t, held)
	var leaseEnd time.Time
	select {
	case r := <-first:
		if r.err != nil {
			t.Logf("A's Acquire: %v (no lease handed out)", r.err)
			break
		}
		<-r.lease.Done()
		leaseEnd = time.Now()
		t.Logf("A's lease ended %v after its last answered renewal (%v)", leaseEnd.Sub(renewed).Round(time.Millisecond), r.lease.Err())
	case <-time.After(5 * time.Second):
		t.Fatal("A's Acquire did not return")
	}
	var next grant
	select {
	case next = <-bGranted:
	case <-time.After(3 * time.Second):
		t.Fatal("B was never granted")
	}
	t.Logf("B was granted %v after A's last answered renewal", next.at.Sub(renewed).Round(time.Millisecond))
	if !leaseEnd.IsZero() && !leaseEnd.Before(next.at) {
		t.Errorf("A's lease was valid until %v after B's grant", leaseEnd.Sub(next.at))
	}
	if next.lease != nil {
		released(t, next.lease)
	}
}

// setFullMemory makes Redis refuse writes that may grow its memory, as a
// noeviction Redis at its maxmemory does, or lets them in again.
func setFullMemory(t testing.TB, rdb *redis.Client, full bool) {
	t.Helper()
	limit := "0"
	if full {
		limit = "1"
	}
	ctx := context.Background()
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", limit).Err(); err != nil {
		t.Fatal(err)
	}
}

// At full memory the parties already in go on: a holder's lease and its
// permits stay its own for as long as it renews them, and a waiter is
// granted what a holder that stopped renewing left.
func TestFullMemoryKeepsThePartiesIn(t *testing.T) {
	t.Parallel()
	// A lease's record lives 30 × 300 ms = 9 s. A heartbeat every 100 ms:
	// a renewal answered within 270 ms keeps the lease, so a stall of the
	// process under -race on a busy machine shorter than about 170 ms does
	// not end it. With 100 ms, CI saw a stall end it (its deadline is 90 ms
	// after a renewal's send), which is the lease's promise, not a break.
	const ttl = 300 * time.Millisecond
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 30*time.Second)
	opts := []fairlock.Option{fairlock.WithLeaseTTL(ttl), fairlock.WithWaiterTTL(ttl)}
	a, b := newLocker(t, srv.Client(t), opts...), newLocker(t, srv.Client(t), opts...)

	t.Run("renewing-holder", func(t *testing.T) {
		// A lease lost to a stall of this process or of redis-server
		// (heartbeats answered later than 270 ms) keeps its promise; a
		// renewal refused at full memory would end it at every try, so a
		// second try tells the two apart.
		for try := 1; ; try++ {
			lost := renewAtFullMemory(t, ctx, rdb, ttl, mustSem(t, a, fmt.Sprint("full1-", try), 1), mustSem(t, b, fmt.Sprint("full1-", try), 1))
			if lost == nil {
				return
			}
			if try == 2 {
				t.Fatalf("the holder's lease ended at full memory at both tries: %v", lost)
			}
			t.Logf("try %d: the holder's lease ended at full memory (%v), taken for a stall of a loaded machine: trying once more", try, lost)
			time.Sleep(ttl) // the waiter's lease, granted meanwhile, is released
		}
	})
	t.Run("mutex-release", func(t *testing.T) {
		// Taken on the fast path before memory ran out: the release with
		// nobody waiting (release_fast.lua), then the one that finds a
		// waiter and hands the lock on (release.lua after it).
		held := mustAcquire(t, a, "full3")
		setFullMemory(t, rdb, true)
		released(t, held)
		setFullMemory(t, rdb, false)
		if h := holderOf(t, a, "full3"); h != "" {
			t.Fatalf("held by %q after the release at full memory", h)
		}
		held = mustAcquire(t, a, "full3")
		next := queueBehind(t, ctx, b, "full3")
		setFullMemory(t, rdb, true)
		defer setFullMemory(t, rdb, false)
		released(t, held)
		s, _ := await(t, next, handoff)
		released(t, s)
	})
	t.Run("expired-holder", func(t *testing.T) {
		c := newLocker(t, srv.Client(t), append(opts, fairlock.WithAutoRenew(false))...)
		hold(t, permits(mustSem(t, c, "full2", 1), 1)) // its record lives the lease TTL
		next := queueFor(t, ctx, permits(mustSem(t, b, "full2", 1), 1))
		setFullMemory(t, rdb, true)
		defer setFullMemory(t, rdb, false)
		bound := ttl + ttl/3 + slack
		s, took := await(t, next, bound)
		t.Logf("at full memory, the waiter was granted %v after the holder's record could expire (bound %v)", took, bound)
		released(t, s)
	})
}

// renewAtFullMemory holds a permit of a, queues for one of b, fills
// Redis's memory past the permit's record TTL, and returns the holder's
// error if its lease ended meanwhile. A waiter granted while the lease
// was still valid fails t.
func renewAtFullMemory(t *testing.T, ctx context.Context, rdb *redis.Client, ttl time.Duration, a, b *fairlock.Semaphore) error {
	t.Helper()
	held := hold(t, permits(a, 1))
	next := queueFor(t, ctx, permits(b, 1))
	setFullMemory(t, rdb, true)
	defer setFullMemory(t, rdb, false)
	// Past the record's TTL, several renewals of it later.
	select {
	case r := <-next:
		if held.Err() == nil {
			t.Fatalf("a waiter was granted (%v) while the renewing holder's lease was still valid", r.err)
		}
		if r.err == nil {
			released(t, r.lease)
		}
		return held.Err()
	case <-held.Done():
		setFullMemory(t, rdb, false)
		// The Locker withdraws the lost lease within a heartbeat. In the
		// stall that ended it the waiter may have lost its place too, and
		// been refused as it queued again at full memory, as a new request
		// is.
		select {
		case r := <-next:
			switch {
			case r.err == nil:
				released(t, r.lease)
			case !strings.Contains(r.err.Error(), "OOM"):
				t.Fatalf("Acquire: %v", r.err)
			}
		case <-time.After(ttl + slack):
			t.Fatalf("the waiter was not granted within %v of the lost lease", ttl+slack)
		}
		return held.Err()
	case <-time.After(30*ttl + time.Second):
	}
	if err := held.Release(ctx); err != nil {
		t.Fatalf("Release at full memory: %v", err)
	}
	s, _ := await(t, next, handoff)
	released(t, s)
	return nil
}

// A request held in the network until after its caller gave up and
// withdrew reaches Redis late: it must not queue or take the lock, on the
// fast path, on the script's path, and for a semaphore.
func TestRequestAfterItsCancel(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 60*time.Second)
	px := redistest.StartProxy(t, srv.Addr)
	c := redis.NewClient(&redis.Options{Addr: px.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	l := newLocker(t, c)
	other := newLocker(t, srv.Client(t))
	rdb := srv.Client(t)
	// Another lease keeps l's session alive throughout, as a busy process's
	// would.
	keep := mustAcquire(t, l, "keep")
	defer released(t, keep)

	// late sends acquire through a request held until its caller gave up
	// (300 ms) and withdrew, then lets it reach Redis, and returns when it
	// has run.
	late := func(t *testing.T, marker string, acquire acquireFunc) {
		t.Helper()
		held := px.HoldRequest(marker)
		defer held.Release()
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		s, err := acquire(short)
		if err == nil {
			released(t, s)
			t.Fatal("Acquire succeeded though its request was held")
		}
		select {
		case <-held.Caught():
		default:
			t.Fatalf("the request was never held: %v", err)
		}
		t.Logf("Acquire: %v", err)
		time.Sleep(heartbeat + 100*time.Millisecond) // the withdrawal, on another connection, runs first
		held.Release()
		time.Sleep(100 * time.Millisecond) // the late request runs
	}

	t.Run("fast-path", func(t *testing.T) {
		late(t, "{fast}", func(ctx context.Context, o ...fairlock.AcquireOption) (*fairlock.Lease, error) {
			return l.Acquire(ctx, "fast", o...)
		})
		if v := rdb.Get(ctx, "fairlock:{fast}:lock").Val(); v == "" {
			t.Fatal("the late SET did not take the key: the test proves nothing")
		}
		s, err := other.TryAcquire(ctx, "fast")
		if err != nil {
			t.Fatalf("after the late request: %v, want the lock free (held by %q)", err, holderOf(t, other, "fast"))
		}
		released(t, s)
	})
	t.Run("script", func(t *testing.T) {
		holder := mustAcquire(t, other, "script")
		if _, err := l.TryAcquire(ctx, "script"); !errors.Is(err, fairlock.ErrNotAcquired) {
			t.Fatal(err) // l now skips the fast path on it
		}
		late(t, "{script}", func(ctx context.Context, o ...fairlock.AcquireOption) (*fairlock.Lease, error) {
			return l.Acquire(ctx, "script", o...)
		})
		if st, _ := other.Inspect(ctx, fairlock.LockMutex, "script"); st.Queued != 0 {
			t.Errorf("the late request queued: %+v", st)
		}
		next := queueBehind(t, ctx, other, "script")
		released(t, holder)
		s, _ := await(t, next, heartbeat+slack)
		released(t, s)
	})
	t.Run("semaphore", func(t *testing.T) {
		holder := hold(t, permits(mustSem(t, other, "sem", 1), 1))
		late(t, "{sem}", permits(mustSem(t, l, "sem", 1), 1))
		next := queueFor(t, ctx, permits(mustSem(t, other, "sem", 1), 1))
		released(t, holder)
		s, _ := await(t, next, heartbeat+slack)
		released(t, s)
	})
}

// A waiter whose process dies just as it is granted holds the lock for its
// waiter TTL, not its lease TTL: its Locker never took the grant up.
func TestWaiterKilledAsGranted(t *testing.T) {
	t.Parallel()
	const lease, waiter = 5 * time.Second, 450 * time.Millisecond // a heartbeat of 150 ms
	srv := redistest.Start(t)
	ctx := withTimeout(t, 30*time.Second)
	px := redistest.StartProxy(t, srv.Addr)
	opts := []fairlock.Option{fairlock.WithLeaseTTL(lease), fairlock.WithWaiterTTL(waiter)}
	dc := redis.NewClient(&redis.Options{Addr: px.Addr, MaxRetries: -1})
	t.Cleanup(func() { dc.Close() })
	h, d, w := newLocker(t, srv.Client(t), opts...), newLocker(t, dc, opts...), newLocker(t, srv.Client(t), opts...)
	for _, kind := range []string{"mutex", "semaphore"} {
		t.Run(kind, func(t *testing.T) {
			take := func(l *fairlock.Locker) acquireFunc {
				if kind == "mutex" {
					return func(ctx context.Context, o ...fairlock.AcquireOption) (*fairlock.Lease, error) {
						return l.Acquire(ctx, "dies", o...)
					}
				}
				return permits(mustSem(t, l, "dies", 1), 1)
			}
			held := hold(t, take(h))
			dying := queueFor(t, ctx, take(d))
			next := queueFor(t, ctx, take(w))
			px.Refuse(true)
			defer px.Refuse(false)
			px.Cut()
			killed := time.Now()
			released(t, held)
			bound := waiter + waiter/3 + slack
			var s *fairlock.Lease
			select {
			case r := <-next:
				if r.err != nil {
					t.Fatalf("Acquire: %v", r.err)
				}
				s = r.lease
			case <-time.After(lease):
				// Seen once, in a CI run beside a long state-machine run;
				// what the lock looked like says where it stuck.
				lk := fairlock.LockMutex
				if kind == "semaphore" {
					lk = fairlock.LockSemaphore
				}
				st, err := w.Inspect(ctx, lk, "dies")
				t.Fatalf("no grant within %v; the lock then: %+v (%v)", lease, st, err)
			}
			took := time.Since(killed)
			t.Logf("the next waiter was granted %v after the head died as it was granted (bound %v)", took, bound)
			if took > bound {
				t.Errorf("the next waiter waited %v, over the waiter TTL's bound %v", took, bound)
			}
			released(t, s)
			if r := <-dying; r.err == nil {
				r.lease.Release(ctx) //nolint:errcheck // lost long ago
			}
		})
	}
}

// Close is bounded by its context when Redis cannot be reached, however
// many leases the Locker holds, and Close without one by the waiter TTL.
func TestCloseWithRedisGone(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for _, n := range []int{1, 4} {
		for _, how := range []string{"Shutdown", "Close"} {
			px := redistest.StartProxy(t, srv.Addr)
			c := redis.NewClient(&redis.Options{Addr: px.Addr})
			l, err := fairlock.New(c, fairlock.WithLeaseTTL(leaseTTL), fairlock.WithWaiterTTL(waiterTTL))
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				mustAcquire(t, l, "gone"+string(rune('a'+i)))
			}
			px.Refuse(true)
			px.Cut()
			start := time.Now()
			bound := waiterTTL
			if how == "Shutdown" {
				bound = 200 * time.Millisecond
				ctx, cancel := context.WithTimeout(context.Background(), bound)
				err = l.Shutdown(ctx)
				cancel()
			} else {
				err = l.Close()
			}
			took := time.Since(start)
			t.Logf("%s with %d leases and Redis gone: %v after %v (bound %v)", how, n, err, took.Round(time.Millisecond), bound)
			if err == nil {
				t.Errorf("%s with Redis gone returned nil", how)
			}
			if took > bound+slack {
				t.Errorf("%s took %v, over its bound %v", how, took, bound)
			}
			c.Close()
			px.Close()
		}
	}
}

// TTLs whose multiples the engine counts with (the keys live 30 × the
// longer TTL) are refused above MaxTTL, with ErrInvalid, rather than left
// to overflow; MaxTTL itself works.
func TestTTLsAboveTheMaximum(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	tenYears := 10 * 365 * 24 * time.Hour
	for _, opt := range []fairlock.Option{fairlock.WithLeaseTTL(tenYears), fairlock.WithWaiterTTL(tenYears),
		fairlock.WithLeaseTTL(fairlock.MaxTTL + time.Millisecond)} {
		if _, err := fairlock.New(rdb, opt); !errors.Is(err, fairlock.ErrInvalid) {
			t.Errorf("New with a TTL above MaxTTL: %v, want ErrInvalid", err)
		}
	}
	l, err := fairlock.New(rdb, fairlock.WithLeaseTTL(fairlock.MaxTTL), fairlock.WithWaiterTTL(fairlock.MaxTTL))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := withTimeout(t, 5*time.Second)
	for _, acquire := range []acquireFunc{
		func(ctx context.Context, o ...fairlock.AcquireOption) (*fairlock.Lease, error) {
			return l.Acquire(ctx, "max", o...)
		},
		permits(mustSem(t, l, "max", 2), 1),
	} {
		s, err := acquire(ctx)
		if err != nil {
			t.Fatalf("Acquire with MaxTTL: %v", err)
		}
		if err := s.Extend(ctx, fairlock.MaxTTL+time.Millisecond); !errors.Is(err, fairlock.ErrInvalid) {
			t.Errorf("Extend above MaxTTL: %v, want ErrInvalid", err)
		}
		if s.Err() != nil {
			t.Fatalf("the lease with MaxTTL: %v", s.Err())
		}
		released(t, s)
	}
}

// A lost answer is asked about (recover.lua), and the answer is only as
// good as what Redis still has. Each case was found by the state machine.
func TestLostAnswersAreAskedAbout(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 30*time.Second)
	px := redistest.StartProxy(t, srv.Addr)
	c := redis.NewClient(&redis.Options{Addr: px.Addr, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	l := newLocker(t, c)
	other := newLocker(t, srv.Client(t))
	released(t, mustAcquire(t, l, "warm"))

	t.Run("fresh-fence", func(t *testing.T) {
		// The fast path's INCR counts a new fence key up from 1: a grant
		// learnt from recover.lua has a fence drawn after the seed.
		px.DropReplyTo("{fresh}")
		s := mustAcquire(t, l, "fresh")
		if s.Fence() < 1_000_000_000_000 {
			t.Errorf("fence %d of a grant whose answer was lost, want one seeded from the clock", s.Fence())
		}
		released(t, s)
	})
	t.Run("session-gone", func(t *testing.T) {
		// Redis lost the session: the fast path's SET takes the lock for a
		// token of a dead session, which nobody counts as held. The call
		// must not hand that grant out.
		rdb.FlushAll(ctx)
		px.DropReplyTo("{gone}")
		s := mustAcquire(t, l, "gone")
		if h := holderOf(t, other, "gone"); h != s.Token() {
			t.Fatalf("Acquire handed out %s, but Redis counts %q as the holder", s.Token(), h)
		}
		if _, err := other.TryAcquire(ctx, "gone"); !errors.Is(err, fairlock.ErrNotAcquired) {
			t.Fatalf("another Locker's TryAcquire while the lease is held: %v", err)
		}
		released(t, s)
	})
	t.Run("waiters-first", func(t *testing.T) {
		// The lock is free but a waiter is queued (its holder expired with
		// nobody releasing): the fast path's SET takes it, its answer is
		// lost, and the call must hand it to the waiter, not keep it.
		token := liveWaiter(t, rdb, "queued", 1)
		px.DropReplyTo("{queued}")
		got := make(chan result, 1)
		go func() {
			s, err := l.Acquire(ctx, "queued")
			got <- result{s, err}
		}()
		deadline := time.Now().Add(2 * time.Second)
		for holderOf(t, other, "queued") != token {
			if time.Now().After(deadline) {
				t.Fatalf("the queued waiter %s was never granted: the lock is held by %q", token, holderOf(t, other, "queued"))
			}
			time.Sleep(5 * time.Millisecond)
		}
		select {
		case r := <-got:
			t.Fatalf("Acquire returned (%v) while the waiter queued before it holds the lock", r.err)
		case <-time.After(100 * time.Millisecond):
		}
		if _, err := other.ForceRelease(ctx, fairlock.LockMutex, "queued", token); err != nil {
			t.Fatal(err)
		}
		s, _ := await(t, got, 2*time.Second)
		released(t, s)
	})
}

// Extend never shortens a lease: an extension the network delays must not
// cut a later one short.
func TestExtendNeverShortens(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 10*time.Second)
	l := newLocker(t, srv.Client(t), fairlock.WithAutoRenew(false))
	for kind, acquire := range map[fairlock.LockKind]acquireFunc{
		fairlock.LockMutex: func(ctx context.Context, o ...fairlock.AcquireOption) (*fairlock.Lease, error) {
			return l.Acquire(ctx, "ext", o...)
		},
		fairlock.LockSemaphore: permits(mustSem(t, l, "ext", 2), 1),
	} {
		s := hold(t, acquire)
		if err := s.Extend(ctx, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := s.Extend(ctx, 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		if s.Err() != nil {
			t.Fatalf("the lease ended after a shorter Extend: %v", s.Err())
		}
		if st, err := l.Inspect(ctx, kind, "ext"); err != nil || !st.Held() || st.Holders[0].Token != s.Token() {
			t.Fatalf("%v: after Extend(5s) and Extend(100ms), 300ms later Redis has %+v (%v)", kind, st, err)
		}
		released(t, s)
	}
}

// A dead waiter's line may expire before the order set: its Locker alone
// kept the line, Lockers with longer TTLs kept the order set. B (3 s
// TTLs: keys kept 90 s) queues at priority 9 and is granted; A (75 ms
// TTLs: keys kept 2.25 s) queues at priority 4 behind B, and dies. While
// B holds, nobody's heartbeat scans the lock: A's line expires with A's
// token still in the order set. That is harmless: once B releases, a new
// waiter is granted at once, and once no line has a head, the grant loop
// takes A's token for the head, and drops it, dead.
func TestDeadWaiterOutlivesItsLine(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 20*time.Second)
	long := newLocker(t, srv.Client(t), fairlock.WithLeaseTTL(3*time.Second), fairlock.WithWaiterTTL(3*time.Second))
	held := mustAcquire(t, newLocker(t, srv.Client(t)), "torn")
	b := queueBehind(t, ctx, long, "torn", fairlock.WithPriority(9))
	px := redistest.StartProxy(t, srv.Addr)
	short := newLocker(t, redis.NewClient(&redis.Options{Addr: px.Addr}), fairlock.WithLeaseTTL(75*time.Millisecond), fairlock.WithWaiterTTL(75*time.Millisecond))
	queueBehind(t, ctx, short, "torn", fairlock.WithPriority(4))
	released(t, held)
	bs, _ := await(t, b, handoff)
	px.Refuse(true)
	px.Cut()
	deadline := time.Now().Add(5 * time.Second)
	for rdb.Exists(ctx, "fairlock:{torn}:queue:4").Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("the dead waiter's line lives on")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := rdb.ZCard(ctx, "fairlock:{torn}:order").Val(); n != 1 {
		t.Fatalf("the order set holds %d tokens after the line expired, want the dead one", n)
	}
	c := queueBehind(t, ctx, newLocker(t, srv.Client(t)), "torn")
	released(t, bs)
	s, took := await(t, c, handoff)
	t.Logf("the new waiter was granted %v after the release", took)
	released(t, s)
	if n := rdb.ZCard(ctx, "fairlock:{torn}:order").Val(); n != 0 {
		t.Errorf("the order set holds %d tokens, want none", n)
	}
}
