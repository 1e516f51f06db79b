package main

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A kindWorker is one client of a counting semaphore and a read-write lock,
// on its own connection(s). The taken it returns says how many permits it
// holds, whether it writes, and its fence and queued time where the peer
// has them (see rec).
type kindWorker interface {
	// Semaphore takes n permits of the semaphore name of capacity permits.
	Semaphore(ctx context.Context, name string, capacity, n int) (taken, error)
	// RWLock takes the read-write lock name, alone if write, else shared.
	RWLock(ctx context.Context, name string, write bool) (taken, error)
	Close() error
}

// groupSemaphore is a kind worker whose semaphore shares its permits
// fairly between groups (tenants) rather than between requests:
// fairlock's WithGroup, and WithGroupWeight.
type groupSemaphore interface {
	// SemaphoreGroup is Semaphore for a request of group, which it weighs
	// weight (1: the default).
	SemaphoreGroup(ctx context.Context, name string, capacity, n int, group string, weight int) (taken, error)
}

// prioritySemaphore is a kind worker whose semaphore grants requests of
// higher priority first: fairlock's WithPriority.
type prioritySemaphore interface {
	// SemaphorePriority is Semaphore for a request of priority, 0 (the
	// default) to maxPriority.
	SemaphorePriority(ctx context.Context, name string, capacity, n, priority int) (taken, error)
}

// semaphoreQueued is a kind worker that can count the live waiters of a
// semaphore, as runScale's probe needs (fairlock's Inspect).
type semaphoreQueued interface {
	SemaphoreQueued(ctx context.Context, name string) (int, error)
}

// kindAsWorker is a kind worker seen as a mutex worker whose Lock takes one
// grant by lock, for the code written for the mutex: newWorkerSet's warm-up
// and runScale's holder and waiters.
type kindAsWorker struct {
	kindWorker
	lock func(ctx context.Context, w kindWorker, name string) (taken, error)
}

func (a kindAsWorker) Lock(ctx context.Context, name string) (unlockFunc, error) {
	t, err := a.lock(ctx, a.kindWorker, name)
	return t.unlock, err
}

// queuedKindWorker is a kindAsWorker of a semaphore that reports its
// waiters (queuedReporter).
type queuedKindWorker struct{ kindAsWorker }

func (q queuedKindWorker) Queued(ctx context.Context, name string) (int, error) {
	return q.kindWorker.(semaphoreQueued).SemaphoreQueued(ctx, name)
}

// semaphoreAsPeer is p with workers whose Lock takes 1 of capacity permits
// of a semaphore (and who report its waiters where p can).
func semaphoreAsPeer(p peer, capacity int) peer {
	return kindAsPeer(p, func(ctx context.Context, w kindWorker, name string) (taken, error) {
		return w.Semaphore(ctx, name, capacity, 1)
	})
}

// rwAsPeer is p with workers whose Lock takes a read-write lock alone (as
// a warm-up, it loads the spinner's writer release script too).
func rwAsPeer(p peer) peer {
	return kindAsPeer(p, func(ctx context.Context, w kindWorker, name string) (taken, error) {
		return w.RWLock(ctx, name, true)
	})
}

func kindAsPeer(p peer, lock func(ctx context.Context, w kindWorker, name string) (taken, error)) peer {
	q := p
	q.New = func(e *env, c *counters) (worker, error) {
		kw, err := p.Kinds(e, c)
		if err != nil {
			return nil, err
		}
		a := kindAsWorker{kw, lock}
		if _, ok := kw.(semaphoreQueued); ok {
			return queuedKindWorker{a}, nil
		}
		return a, nil
	}
	return q
}

// kindOf returns the kind worker behind a worker of kindAsPeer.
func kindOf(w worker) kindWorker {
	switch a := w.(type) {
	case kindAsWorker:
		return a.kindWorker
	case queuedKindWorker:
		return a.kindWorker
	}
	panic("not a kind worker")
}

// spin calls try until it succeeds, sleeping delay after each refusal, as
// every spinning peer does. It returns when the first refusal came back (0
// if there was none): the moment the client knew it had to wait.
func spin(ctx context.Context, delay time.Duration, try func() (bool, error)) (int64, error) {
	var queued int64
	for {
		ok, err := try()
		if err != nil || ok {
			return queued, err
		}
		if queued == 0 {
			queued = mono()
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return queued, ctx.Err()
		case <-t.C:
		}
	}
}

// ---------------------------------------------------------------- naive semaphore and read-write lock

// naiveSemAcquire is the spinning semaphore's compare-and-increment below
// capacity, with leases: KEYS[1] is a sorted set of "n:token" holders
// scored by their deadline (ms). Expired holders are dropped first; then
// the request is admitted if the permits held plus n fit in the capacity.
// ARGV: member, n, capacity, lease ms.
var naiveSemAcquire = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local held = 0
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
	held = held + tonumber(string.match(m, '^%d+'))
end
if held + tonumber(ARGV[2]) > tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1`)

// naiveRWAcquire is the spinning read-write lock, not fair: a reader is
// admitted whenever no writer holds, a writer only when nobody holds.
// KEYS[1] is a sorted set of readers scored by their deadline (ms), KEYS[2]
// the writer's SET PX key. ARGV: token, "1" for a writer, lease ms.
var naiveRWAcquire = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if ARGV[2] == '1' then
	if redis.call('ZCARD', KEYS[1]) > 0 then return 0 end
	redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[3])
	return 1
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`)

func init() {
	nameScript("naive-sem-acquire", naiveSemAcquire)
	nameScript("naive-rw-acquire", naiveRWAcquire)
}

// naiveKindWorker spins on the two scripts above every spin delay; a
// semaphore holder's release is a ZREM of its member, a reader's a ZREM of
// its token, a writer's the compare-and-delete of the naive mutex.
type naiveKindWorker struct {
	cl    *redis.Client
	ttl   time.Duration
	delay time.Duration
}

func (w *naiveKindWorker) Semaphore(ctx context.Context, name string, capacity, n int) (taken, error) {
	key := "naive-sem:{" + name + "}"
	member := strconv.Itoa(n) + ":" + token()
	args := []any{member, n, capacity, w.ttl.Milliseconds()}
	queued, err := spin(ctx, w.delay, func() (bool, error) {
		v, err := naiveSemAcquire.Run(ctx, w.cl, []string{key}, args...).Int()
		return v == 1, err
	})
	if err != nil {
		return taken{}, err
	}
	return taken{n: n, queued: queued, unlock: func(ctx context.Context) error {
		return w.cl.ZRem(ctx, key, member).Err()
	}}, nil
}

func (w *naiveKindWorker) RWLock(ctx context.Context, name string, write bool) (taken, error) {
	readers, writer := "naive-rw:{"+name+"}:readers", "naive-rw:{"+name+"}:writer"
	tok := token()
	mode := "0"
	if write {
		mode = "1"
	}
	queued, err := spin(ctx, w.delay, func() (bool, error) {
		v, err := naiveRWAcquire.Run(ctx, w.cl, []string{readers, writer}, tok, mode, w.ttl.Milliseconds()).Int()
		return v == 1, err
	})
	if err != nil {
		return taken{}, err
	}
	unlock := func(ctx context.Context) error { return w.cl.ZRem(ctx, readers, tok).Err() }
	if write {
		unlock = func(ctx context.Context) error {
			return naiveRelease.Run(ctx, w.cl, []string{writer}, tok).Err()
		}
	}
	return taken{write: write, queued: queued, unlock: unlock}, nil
}

func (w *naiveKindWorker) Close() error { return w.cl.Close() }
