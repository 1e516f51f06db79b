package fairlock

import (
	"context"
	"strconv"
)

// An RWMutex is a fair read-write lock of one name, shared by every Locker
// on the same Redis. Readers share it; a writer excludes every other
// holder. Requests are granted in strict FIFO order among live waiters, so
// a reader that arrives behind a waiting writer waits for it: a writer is
// never starved by readers who came after it, and waits only for the
// readers ahead of it. When the lock comes free, the run of readers at the
// head of the queue is granted at once, in one script.
//
// An RWMutex is a Semaphore of MaxCapacity permits whose readers take one
// and whose writers take all of them. There is no upgrade from reader to
// writer (two readers upgrading would wait for each other forever) and no
// downgrade: release one lease and acquire the other. It takes no groups:
// fair share between tenants would let readers of one pass a writer of
// another, which is what a fair read-write lock must not do.
//
// An RWMutex, a Mutex and a Semaphore of the same name are independent of
// one another. An RWMutex is safe for concurrent use.
type RWMutex struct {
	locker      *Locker
	read, write request
}

// RWMutex returns the read-write lock called name. It checks the name but
// does not contact Redis.
func (l *Locker) RWMutex(name string) (*RWMutex, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	ref := l.refs.get(rwKind, name)
	return &RWMutex{
		locker: l,
		read:   request{ref: ref, shared: true, permits: 1, capacity: MaxCapacity},
		write:  request{ref: ref, permits: 1, capacity: MaxCapacity, suffix: "#" + strconv.Itoa(MaxCapacity)},
	}, nil
}

// Name is the lock's name.
func (m *RWMutex) Name() string { return m.read.ref.name }

// Lock waits, in FIFO order, until it holds the lock alone, and returns the
// lease. If ctx ends first, the error matches errors.Is(err, ctx.Err()) and
// the waiter has left the queue.
func (m *RWMutex) Lock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return m.locker.acquire(ctx, m.write, true, opts)
}

// RLock waits, in FIFO order, until it holds the lock shared with other
// readers, and returns the lease.
func (m *RWMutex) RLock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return m.locker.acquire(ctx, m.read, true, opts)
}

// TryLock takes the lock alone only if nobody holds it or waits for it, and
// returns ErrNotAcquired otherwise. It never waits.
func (m *RWMutex) TryLock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return m.locker.acquire(ctx, m.write, false, opts)
}

// TryRLock takes the lock shared only if no writer holds it and nobody
// waits for it, and returns ErrNotAcquired otherwise. It never waits and
// never jumps the queue.
func (m *RWMutex) TryRLock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return m.locker.acquire(ctx, m.read, false, opts)
}

// Do runs fn while holding the lock alone, then releases it, on every way
// out of fn, a panic included (see Mutex.Do).
func (m *RWMutex) Do(ctx context.Context, fn func(ctx context.Context) error, opts ...AcquireOption) error {
	return do(ctx, m.locker.cfg.leaseTTL, fn, func() (*Lease, error) { return m.Lock(ctx, opts...) })
}

// DoRead runs fn while holding the lock shared, then releases it, as Do.
func (m *RWMutex) DoRead(ctx context.Context, fn func(ctx context.Context) error, opts ...AcquireOption) error {
	return do(ctx, m.locker.cfg.leaseTTL, fn, func() (*Lease, error) { return m.RLock(ctx, opts...) })
}

// Inspect reads the lock's holders and queue (see Locker.Inspect).
func (m *RWMutex) Inspect(ctx context.Context) (State, error) {
	return m.locker.Inspect(ctx, LockRWMutex, m.Name())
}

// ForceRelease ends the grant called token, or every grant if token is ""
// (see Locker.ForceRelease, and read its warning).
func (m *RWMutex) ForceRelease(ctx context.Context, token string) (ForceReleaseResult, error) {
	return m.locker.ForceRelease(ctx, LockRWMutex, m.Name(), token)
}
