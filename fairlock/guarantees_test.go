package fairlock_test

// Regression tests of promises that once broke in states nobody had
// listed: a queue key without a TTL, Do keeping the lock after a panic, a
// failed Acquire holding the lock, a Redis that evicts keys, one too old,
// and one out of memory.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A queue whose head does not fit keeps its TTL in every sample: its head
// is read, never popped and pushed back (which deleted a one-entry list and
// made it anew without a TTL).
func TestQueueKeepsItsTTLWhileTheHeadDoesNotFit(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 20*time.Second)
	a, b := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	held := hold(t, permits(mustSem(t, a, "ttl", 3), 1))
	big := queueFor(t, ctx, permits(mustSem(t, b, "ttl", 3), 3))
	readers := []*fairlock.Lease{hold(t, mustRW(t, a, "ttl").RLock), hold(t, mustRW(t, a, "ttl").RLock)}
	writer := queueFor(t, ctx, mustRW(t, b, "ttl").Lock)
	queues := []string{"fairlock:{ttl}:sem:queue", "fairlock:{ttl}:rw:queue"}
	samples := 0
	for end := time.Now().Add(3 * heartbeat); time.Now().Before(end); samples++ {
		for _, q := range queues {
			if ttl := rdb.PTTL(ctx, q).Val(); ttl <= 0 {
				t.Fatalf("sample %d: %s has PTTL %v, want a TTL while its head waits", samples, q, ttl)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("%d samples of each queue over 3 heartbeats: every one had a TTL", samples)
	released(t, held)
	s, _ := await(t, big, handoff)
	released(t, s)
	for _, r := range readers {
		released(t, r)
	}
	w, _ := await(t, writer, handoff)
	released(t, w)
}

// Do gives the lock back on every way out of fn, a panic included, for
// every kind; a nil fn is ErrInvalid and takes nothing.
func TestDoReleasesOnPanic(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	client := srv.Client(t)
	counter := &countCommands{}
	client.AddHook(counter)
	l, other := newLocker(t, client), newLocker(t, srv.Client(t))
	mutex, _ := l.Mutex("do")
	sem, rw := mustSem(t, l, "do", 2), mustRW(t, l, "do")
	dos := map[string]func(fn func(context.Context) error) error{
		"Locker.Do":      func(fn func(context.Context) error) error { return l.Do(ctx, "do", fn) },
		"Mutex.Do":       func(fn func(context.Context) error) error { return mutex.Do(ctx, fn) },
		"Semaphore.Do":   func(fn func(context.Context) error) error { return sem.Do(ctx, 2, fn) },
		"RWMutex.Do":     func(fn func(context.Context) error) error { return rw.Do(ctx, fn) },
		"RWMutex.DoRead": func(fn func(context.Context) error) error { return rw.DoRead(ctx, fn) },
	}
	free := map[string]func() (*fairlock.Lease, error){
		"Locker.Do":      func() (*fairlock.Lease, error) { return other.TryAcquire(ctx, "do") },
		"Mutex.Do":       func() (*fairlock.Lease, error) { return other.TryAcquire(ctx, "do") },
		"Semaphore.Do":   func() (*fairlock.Lease, error) { return mustSem(t, other, "do", 2).TryAcquire(ctx, 2) },
		"RWMutex.Do":     func() (*fairlock.Lease, error) { return mustRW(t, other, "do").TryLock(ctx) },
		"RWMutex.DoRead": func() (*fairlock.Lease, error) { return mustRW(t, other, "do").TryLock(ctx) },
	}
	for name, do := range dos {
		func() {
			defer func() {
				if p := recover(); p != "boom" {
					t.Errorf("%s: recovered %v, want the panic to go on after the release", name, p)
				}
			}()
			do(func(context.Context) error { panic("boom") }) //nolint:errcheck // it panics
		}()
		s, err := free[name]()
		if err != nil {
			t.Fatalf("%s: the lock after fn panicked: %v, want it free at once", name, err)
		}
		released(t, s)
		before := counter.n.Load()
		if err := do(nil); !errors.Is(err, fairlock.ErrInvalid) {
			t.Errorf("%s(nil): %v, want ErrInvalid", name, err)
		}
		if n := counter.n.Load() - before; n != 0 {
			t.Errorf("%s(nil) sent %d commands: it must take nothing", name, n)
		}
	}
}

// A caller told that its acquire failed holds nothing, whatever failed: a
// reply lost after Redis ran the command (the call asks what became of it,
// and gets the grant or the place its request made), the same with Redis
// gone before the call could ask (it fails and withdraws), a release whose
// reply was lost, and a Redis restart.
func TestFailedCallsHoldNothing(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 30*time.Second)
	px := redistest.StartProxy(t, srv.Addr)
	other := newLocker(t, srv.Client(t))
	via := func(retries int) *fairlock.Locker {
		c := redis.NewClient(&redis.Options{Addr: px.Addr, MaxRetries: retries})
		t.Cleanup(func() { c.Close() })
		return newLocker(t, c)
	}
	// freeWithin fails unless another Locker can take the mutex within d.
	freeWithin := func(what, name string, d time.Duration) {
		t.Helper()
		deadline := time.Now().Add(d)
		for {
			s, err := other.TryAcquire(ctx, name)
			if err == nil {
				released(t, s)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the lock is still held %v later: %v (held by %q)", what, d, err, holderOf(t, other, name))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	warm := func(l *fairlock.Locker, name string) {
		t.Helper()
		if err := mustAcquire(t, l, name).Release(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// A lost answer is asked about (recover.lua), with go-redis's retries
	// on or off: go-redis never sends a request that brings a token twice.
	for _, retries := range []int{-1, 3} {
		t.Run(fmt.Sprintf("fast-path-reply-lost/retries=%d", retries), func(t *testing.T) {
			l := via(retries)
			name := fmt.Sprintf("fastlost%d", retries)
			warm(l, "w1")
			px.DropReplyTo(name)
			s, err := l.Acquire(ctx, name)
			if err != nil {
				t.Fatalf("Acquire whose reply was lost: %v, want the grant its request made", err)
			}
			if h := holderOf(t, other, name); h != s.Token() {
				t.Fatalf("the call holds %q, want its own token %s", h, s.Token())
			}
			released(t, s)
			freeWithin("after its release", name, slack)
		})
		t.Run(fmt.Sprintf("enqueue-reply-lost/retries=%d", retries), func(t *testing.T) {
			l := via(retries)
			name := fmt.Sprintf("enqlost%d", retries)
			warm(l, "w3")
			holder := mustAcquire(t, other, name)
			// The Locker that found the lock taken skips the fast path: its
			// Acquire goes to the enqueue script.
			if _, err := l.TryAcquire(ctx, name); !errors.Is(err, fairlock.ErrNotAcquired) {
				t.Fatal(err)
			}
			px.DropReplyTo("evalsha")
			got := make(chan result, 1)
			go func() {
				s, err := l.Acquire(ctx, name)
				got <- result{s, err}
			}()
			waitWaitersOf(t, other, name, 1)
			if st, _ := other.Inspect(ctx, fairlock.LockMutex, name); st.Queued != 1 {
				t.Fatalf("an enqueue whose reply was lost queued %d entries, want 1", st.Queued)
			}
			released(t, holder)
			s, _ := await(t, got, handoff)
			released(t, s)
		})
	}
	t.Run("fast-path-reply-lost-then-partition", func(t *testing.T) {
		// Neither the answer nor the question about it gets through: the
		// call fails, and the token holds the lock until the Locker's
		// heartbeat withdraws it, within a heartbeat of Redis answering
		// again.
		l := via(-1)
		warm(l, "w5")
		px.PartitionAfterReplyTo("partlost")
		if _, err := l.Acquire(ctx, "partlost"); err == nil {
			t.Fatal("Acquire whose reply was lost succeeded")
		}
		if h := holderOf(t, other, "partlost"); h == "" {
			t.Fatal("the lost SET did not reach Redis: the test proves nothing")
		}
		px.Refuse(false)
		freeWithin("the fast path's reply lost in a partition", "partlost", heartbeat+slack)
	})
	t.Run("release-reply-lost", func(t *testing.T) {
		l := via(3)
		s := mustAcquire(t, l, "rel")
		px.DropReplyTo("evalsha")
		if err := s.Release(ctx); err != nil {
			t.Fatalf("Release whose reply was lost: %v, want nil (asked once more)", err)
		}
		if !errors.Is(s.Err(), fairlock.ErrReleased) {
			t.Fatalf("lease after the Release: %v", s.Err())
		}
		freeWithin("a release whose reply was lost", "rel", slack)
	})
	t.Run("redis-down", func(t *testing.T) {
		l := via(3)
		s := mustAcquire(t, l, "down")
		px.Refuse(true)
		px.Cut()
		if err := s.Release(ctx); err == nil {
			t.Fatal("Release with Redis unreachable: nil, want the error")
		}
		px.Refuse(false)
		// The Locker withdraws the token once Redis answers again.
		freeWithin("a release that could not reach Redis", "down", heartbeat+slack)
	})
}

// A grant whose reply comes after its session's local deadline is not
// handed out (the caller cannot trust a lease it may already have lost);
// Acquire starts again, a bounded number of times, and the grants it did
// not hand out die with their session, so the lock is not left held.
func TestLateGrantIsNotHandedOut(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	px := redistest.StartProxy(t, srv.Addr)
	c := redis.NewClient(&redis.Options{Addr: px.Addr, ReadTimeout: 10 * time.Second})
	t.Cleanup(func() { c.Close() })
	const ttl = 300 * time.Millisecond
	l := newLocker(t, c, fairlock.WithLeaseTTL(ttl), fairlock.WithWaiterTTL(ttl))
	released(t, mustAcquire(t, l, "warm"))
	// Requests reach Redis at once; every reply comes later than the lease
	// TTL minus the margin, so no renewal or grant is ever in time.
	px.SetLatency(0, ttl+100*time.Millisecond)
	s, err := l.Acquire(withTimeout(t, 30*time.Second), "late")
	px.SetLatency(0, 0)
	if err == nil {
		released(t, s)
		t.Fatal("Acquire handed out a grant that came after its session's local deadline")
	}
	t.Logf("Acquire: %v", err)
	other, err := newLocker(t, srv.Client(t)).TryAcquire(withTimeout(t, 5*time.Second), "late")
	if err != nil {
		t.Fatalf("after the failed Acquire: %v, want the lock free (held by %q)", err, holderOf(t, l, "late"))
	}
	released(t, other)
}

// After a Redis restart, every Locker's first Acquire works, and none is
// left holding a lock it was told it did not get.
func TestFirstAcquiresAfterARestart(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 30*time.Second)
	var ls []*fairlock.Locker
	for range 4 {
		l := newLocker(t, srv.Client(t))
		mustAcquire(t, l, "warm").Release(ctx)
		ls = append(ls, l)
	}
	srv.Restart(t)
	var wg sync.WaitGroup
	errs := make([]error, len(ls))
	for i, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			s, err := l.Acquire(actx, "after")
			if err == nil {
				err = s.Release(ctx)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Logf("Locker %d: %v", i, err)
		}
	}
	s, err := newLocker(t, srv.Client(t)).TryAcquire(ctx, "after")
	if err != nil {
		t.Fatalf("the lock after the Acquires that followed a restart: %v, want it free (held by %q)", err, holderOf(t, ls[0], "after"))
	}
	released(t, s)
}

// waitWaitersOf polls Inspect until the mutex name has n live waiters.
func waitWaitersOf(t testing.TB, l *fairlock.Locker, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := l.Inspect(context.Background(), fairlock.LockMutex, name)
		if err == nil && len(st.Waiters) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q: want %d waiters, have %+v (%v)", name, n, st, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A Redis that may evict keys is refused for every kind, with a short error
// that names the policy; WithUnsafeEviction accepts it with one warning.
func TestEvictionPolicies(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args  []string
		risky bool
	}{
		{[]string{"--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"}, true},
		{[]string{"--maxmemory", "100mb", "--maxmemory-policy", "volatile-ttl"}, true},
		{[]string{"--maxmemory", "100mb", "--maxmemory-policy", "noeviction"}, false},
		{[]string{"--maxmemory", "0", "--maxmemory-policy", "allkeys-lru"}, false},
	} {
		t.Run(strings.Join(c.args[1:], " "), func(t *testing.T) {
			srv := redistest.Start(t, c.args...)
			ctx := withTimeout(t, 10*time.Second)
			l := newLocker(t, srv.Client(t))
			calls := map[string]func() (*fairlock.Lease, error){
				"mutex":     func() (*fairlock.Lease, error) { return l.TryAcquire(ctx, "e") },
				"semaphore": func() (*fairlock.Lease, error) { return mustSem(t, l, "e", 2).Acquire(ctx, 1) },
				"rwmutex":   func() (*fairlock.Lease, error) { return mustRW(t, l, "e").RLock(ctx) },
			}
			for kind, call := range calls {
				s, err := call()
				if c.risky {
					if !errors.Is(err, fairlock.ErrUnsafeEviction) || !strings.Contains(err.Error(), c.args[3]) || len(err.Error()) > 300 {
						t.Errorf("%s: %v, want a short ErrUnsafeEviction naming %s", kind, err, c.args[3])
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", kind, err)
				}
				released(t, s)
			}
			if !c.risky {
				return
			}
			var warnings []fairlock.Event
			var mu sync.Mutex
			unsafe := newLocker(t, srv.Client(t), fairlock.WithUnsafeEviction(), fairlock.WithObserver(func(e fairlock.Event) {
				if e.Kind == fairlock.EventWarning {
					mu.Lock()
					warnings = append(warnings, e)
					mu.Unlock()
				}
			}))
			for range 3 {
				s, err := unsafe.TryAcquire(ctx, "e")
				if err != nil {
					t.Fatalf("WithUnsafeEviction: %v", err)
				}
				released(t, s)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(warnings) != 1 || !errors.Is(warnings[0].Err, fairlock.ErrUnsafeEviction) {
				t.Fatalf("warnings %+v, want one about the eviction policy", warnings)
			}
		})
	}
}

// A user whose ACL rule forbids INFO: the Locker goes on, with one warning.
func TestEvictionCheckWithoutINFO(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	srv.SetUser(t, "ACL SETUSER noinfo on >pw ~* &* +@all -info")
	ctx := withTimeout(t, 10*time.Second)
	var warnings []fairlock.Event
	var mu sync.Mutex
	l := newLocker(t, srv.ClientAs(t, "noinfo", "pw"), fairlock.WithObserver(func(e fairlock.Event) {
		if e.Kind == fairlock.EventWarning {
			mu.Lock()
			warnings = append(warnings, e)
			mu.Unlock()
		}
	}))
	for range 2 {
		s, err := l.TryAcquire(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		released(t, s)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(warnings) != 1 || !strings.Contains(warnings[0].Err.Error(), "NOPERM") {
		t.Fatalf("warnings %+v, want one saying INFO was refused", warnings)
	}
}

// regexpVersion matches the version of a 7.0 or later server (Valkey's
// redis_version is the Redis it is compatible with, 7.2.4 for Valkey 8),
// which the proxy changes to 6.2 of the same length, so that the reply's
// RESP length still holds.
var regexpVersion = regexp.MustCompile(`redis_version:\d\.\d\.(\d+)`)

// A Redis older than 7.0 gets a clear error that names the version needed,
// before any script runs. The proxy makes the server say it is 6.2.
func TestRedisTooOld(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	px := redistest.StartProxy(t, srv.Addr)
	px.RewriteReplies(func(b []byte) []byte {
		return regexpVersion.ReplaceAll(b, []byte("redis_version:6.2.$1"))
	})
	c := redis.NewClient(&redis.Options{Addr: px.Addr})
	t.Cleanup(func() { c.Close() })
	names := &commandNames{}
	l := newLocker(t, c)
	c.AddHook(names)
	_, err := l.Acquire(withTimeout(t, 5*time.Second), "old")
	if err == nil || !strings.Contains(err.Error(), "6.2.") || !strings.Contains(err.Error(), fairlock.MinRedisVersion) {
		t.Fatalf("Acquire on Redis 6.2: %v, want an error naming %s", err, fairlock.MinRedisVersion)
	}
	if got := names.list(); len(got) != 2 || got[0] != "info" || got[1] != "info" {
		t.Errorf("commands sent %q, want the 2 INFOs only", got)
	}
	t.Logf("on Redis 6.2: %v", err)
}

// Under noeviction at full memory: a new acquire fails promptly with Redis's
// out-of-memory error, the holder's release still hands the lock on,
// nothing is left without a TTL, and everything works again once memory is
// freed.
func TestFullMemory(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
	rdb := srv.Client(t)
	ctx := withTimeout(t, 30*time.Second)
	a, b, c := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	held := mustAcquire(t, a, "full")
	next := queueBehind(t, ctx, b, "full")
	fill := bytes.Repeat([]byte("x"), 64<<10)
	filled := 0
	for ; ; filled++ {
		if err := rdb.Set(ctx, fmt.Sprintf("junk:%d", filled), fill, 0).Err(); err != nil {
			if !strings.Contains(err.Error(), "OOM") {
				t.Fatalf("filling memory: %v", err)
			}
			break
		}
	}
	// Memory in use moves a little on its own (clients' buffers shrink):
	// a limit 1 MiB under it keeps every write refused until the junk goes.
	var used int64
	fmt.Sscan(rdb.InfoMap(ctx, "memory").Val()["Memory"]["used_memory"], &used)
	if err := rdb.ConfigSet(ctx, "maxmemory", fmt.Sprint(used-1<<20)).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := c.Acquire(ctx, "other")
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "OOM") || took > time.Second {
		t.Fatalf("Acquire at full memory: %v after %v, want Redis's OOM error at once", err, took)
	}
	t.Logf("at full memory (%d junk keys): Acquire -> %v (%v)", filled, err, took.Round(time.Millisecond))
	if err := held.Release(ctx); err != nil {
		t.Fatalf("Release at full memory: %v", err)
	}
	s, _ := await(t, next, heartbeat+slack)
	for _, k := range rdb.Keys(ctx, "fairlock:*").Val() {
		if ttl := rdb.PTTL(ctx, k).Val(); ttl <= 0 {
			t.Errorf("at full memory, key %s has PTTL %v", k, ttl)
		}
	}
	released(t, s)
	for i := range filled {
		rdb.Del(ctx, fmt.Sprintf("junk:%d", i))
	}
	rdb.ConfigSet(ctx, "maxmemory", "4mb")
	again, err := c.Acquire(ctx, "other")
	if err != nil {
		t.Fatalf("Acquire once memory is freed: %v", err)
	}
	released(t, again)
}

// commandNames records the names of the commands a client sends, but for
// those of a new connection's handshake.
type commandNames struct {
	mu    sync.Mutex
	names []string
}

func (c *commandNames) add(cmd redis.Cmder) {
	if name := cmd.Name(); name != "hello" && name != "client" {
		c.mu.Lock()
		c.names = append(c.names, name)
		c.mu.Unlock()
	}
}

func (c *commandNames) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.names...)
}

func (c *commandNames) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandNames) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(cmd)
		return next(ctx, cmd)
	}
}

func (c *commandNames) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.add(cmd)
		}
		return next(ctx, cmds)
	}
}
