package fairlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

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
	l.refs = newRefCache(&l.cfg, l.id, l.sharded)
	l.notifier = newNotifier(client, cfg.heartbeat(), l.stopped, &l.bg, l.delivered, l.kickHeartbeat)
	l.books = books{
		current:  map[string]*session{},
		sessions: map[*session]struct{}{},
		waiters:  map[string]*waiter{},
		locks:    map[refKey]*localLock{},
		pending:  map[string]*withdrawal{},
	}
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

// Close ends pending Acquire calls with ErrClosed (they leave their queues),
// releases the leases this Locker holds, ends its sessions in Redis, and
// stops its goroutines. Calls after Close return ErrClosed. Close is
// idempotent.
func (l *Locker) Close() error {
	b := &l.books
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(l.closing)
	b.mu.Unlock()
	l.calls.Wait()

	b.mu.Lock()
	var held []*Lease
	for _, ll := range b.locks {
		for s := range ll.leases {
			held = append(held, s)
		}
	}
	b.mu.Unlock()
	var errs []error
	for _, s := range held {
		ctx, cancel := context.WithTimeout(context.Background(), l.cfg.leaseTTL)
		if err := s.Release(ctx); err != nil && !errors.Is(err, ErrNotHeld) {
			errs = append(errs, err)
		}
		cancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.leaseTTL)
	l.retryWithdrawals()
	if err := l.closeSessions(ctx); err != nil {
		errs = append(errs, err)
	}
	cancel()
	close(l.stopped)
	errs = append(errs, l.notifier.close())
	l.bg.Wait()
	return errors.Join(errs...)
}
