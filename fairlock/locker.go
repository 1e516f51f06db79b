package fairlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// A Locker grants fair locks on one Redis (or Redis Cluster) to the
// goroutines of a process. It is safe for concurrent use; one per process
// is the normal use. All its waiters and leases share one session, one
// pub/sub connection (one per shard on Cluster) and one heartbeat timer.
type Locker struct {
	client   redis.UniversalClient
	batch    *batcher // carries the script calls of Acquire, Release, Extend and withdrawals
	cfg      config
	id       string
	sharded  bool // on Redis Cluster: sessions and channels per lock name
	refs     *refCache
	notifier *notifier
	checks   preflight
	books    *books
	calls    sync.WaitGroup // Acquire and TryAcquire calls under way
	closing  chan struct{}  // closed by Shutdown: waiters give up
	stopped  chan struct{}  // closed by Shutdown when no call is left: background goroutines stop
	kick     chan struct{}  // asks for a heartbeat now
	bg       sync.WaitGroup
	// life bounds the Locker's own calls to Redis (heartbeats, withdrawals):
	// Shutdown ends it when it returns.
	life context.Context
	end  context.CancelFunc
}

// New returns a Locker that keeps its locks on client. It checks the
// options but does not contact Redis: the first acquire checks Redis's
// version and eviction policy (ErrUnsafeEviction).
func New(client redis.UniversalClient, opts ...Option) (*Locker, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil Redis client", ErrInvalid)
	}
	cfg := defaultConfig()
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil option", ErrInvalid)
		}
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	l := &Locker{
		client:  client,
		cfg:     cfg,
		id:      uuid.NewString(),
		closing: make(chan struct{}),
		stopped: make(chan struct{}),
		kick:    make(chan struct{}, 1),
	}
	_, l.sharded = client.(*redis.ClusterClient)
	l.batch = newBatcher(client)
	l.life, l.end = context.WithCancel(context.Background())
	l.refs = newRefCache(&l.cfg, l.id, l.sharded)
	l.books = newBooks(&l.cfg, l.sessionExpired)
	l.notifier = newNotifier(client, cfg.heartbeat(), l.stopped, &l.bg, l.books.deliverGrants, l.kickHeartbeat)
	l.bg.Add(1)
	go l.heartbeatLoop()
	return l, nil
}

// Heartbeat is the period at which the Locker renews its session (which
// keeps its waiters and leases alive) and checks on its waiters for grants
// whose notification was lost: a third of the smaller of the lease and
// waiter TTLs.
func (l *Locker) Heartbeat() time.Duration { return l.cfg.heartbeat() }

// Acquire is l.Mutex(name) and its Acquire: it waits, in strict FIFO
// order among live waiters, until it holds the mutex called name.
func (l *Locker) Acquire(ctx context.Context, name string, opts ...AcquireOption) (*Lease, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	return l.acquire(ctx, l.mutexRequest(name), true, opts)
}

// TryAcquire is l.Mutex(name) and its TryAcquire: it takes the mutex only
// if it is free and nobody waits for it, and returns ErrNotAcquired
// otherwise.
func (l *Locker) TryAcquire(ctx context.Context, name string, opts ...AcquireOption) (*Lease, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	return l.acquire(ctx, l.mutexRequest(name), false, opts)
}

// Do is l.Mutex(name) and its Do: it runs fn while holding the mutex called
// name, and releases it on every way out of fn, a panic included.
func (l *Locker) Do(ctx context.Context, name string, fn func(ctx context.Context) error, opts ...AcquireOption) error {
	if err := checkName(name); err != nil {
		return err
	}
	m := Mutex{locker: l, req: l.mutexRequest(name)}
	return m.Do(ctx, fn, opts...)
}

// Close is Shutdown bounded by the waiter TTL: with Redis reachable it
// returns once everything is released, within a round trip or two; with
// Redis unreachable, after the waiter TTL at most, and what the Locker held
// then ends in Redis by its TTL. It is idempotent.
func (l *Locker) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.waitTTL())
	defer cancel()
	return l.Shutdown(ctx)
}

// closeWorkers is how many releases Shutdown sends at once.
const closeWorkers = 8

// Shutdown ends pending Acquire calls with ErrClosed (they leave their
// queues), releases the leases this Locker holds, withdraws what failed
// calls left, deletes its sessions in Redis, and stops its goroutines.
// Calls after Shutdown return ErrClosed.
//
// ctx bounds all of it. If ctx ends first, Shutdown stops waiting and
// returns an error that matches ctx.Err(): its calls to Redis are
// abandoned, and what it could not release or withdraw ends in Redis with
// its session, within the lease TTL (holders) or the waiter TTL (waiters)
// of its last renewal. A goroutine still inside a call to Redis then ends
// with that call, by go-redis's timeouts. A second Shutdown returns nil at
// once.
func (l *Locker) Shutdown(ctx context.Context) error {
	if !l.books.close() {
		return nil
	}
	close(l.closing)
	defer l.end()
	if err := waitFor(ctx, l.calls.Wait); err != nil {
		return l.stop(ctx, err)
	}
	errs := []error{l.releaseAll(ctx)}
	l.retryWithdrawals(ctx)
	if err := l.closeSessions(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return l.stop(ctx, errors.Join(errs...))
}

// releaseAll releases every lease held here, closeWorkers at a time.
func (l *Locker) releaseAll(ctx context.Context) error {
	leases := l.books.heldLeases()
	held := make(chan *Lease, len(leases))
	for _, s := range leases {
		held <- s
	}
	close(held)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range min(closeWorkers, len(leases)) {
		wg.Go(func() {
			for s := range held {
				if err := s.Release(ctx); err != nil && !errors.Is(err, ErrNotHeld) {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	if err := waitFor(ctx, wg.Wait); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// stop stops the background goroutines, waiting for them while ctx lasts,
// and returns err with what closing the notifier reported.
func (l *Locker) stop(ctx context.Context, err error) error {
	close(l.stopped)
	l.end()
	errs := []error{err, l.notifier.close()}
	// Every background call derives from l.life, now ended: the goroutines
	// return as soon as go-redis hands their calls back.
	wait := func() { l.bg.Wait(); l.batch.stop() }
	if werr := waitFor(ctx, wait); werr != nil && err == nil {
		errs = append(errs, werr)
	}
	return errors.Join(errs...)
}

// waitFor runs wait, and returns when it does or when ctx ends, with
// ctx's error then.
func waitFor(ctx context.Context, wait func()) error {
	done := make(chan struct{})
	go func() {
		wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closeSessions deletes the keys of every session, so that whatever the
// Locker leaves behind is seen as dead at once rather than after its TTL.
func (l *Locker) closeSessions(ctx context.Context) error {
	keys := l.books.stopSessions()
	if len(keys) == 0 {
		return nil
	}
	return pipeline(ctx, l.client, deletions(ctx, keys...))
}
