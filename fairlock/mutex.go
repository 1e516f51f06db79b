package fairlock

import "context"

// A Mutex is a fair, strictly FIFO lock of one name, shared by every
// Locker on the same Redis: one holder at a time, granted in the order the
// requests reached Redis among live waiters. Locker.Acquire, TryAcquire
// and Do are its shorthands. A Mutex is safe for concurrent use, and costs
// nothing to make.
type Mutex struct {
	locker *Locker
	req    request
}

// Mutex returns the mutex called name. It checks the name but does not
// contact Redis.
func (l *Locker) Mutex(name string) (*Mutex, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	return &Mutex{locker: l, req: l.mutexRequest(name)}, nil
}

func (l *Locker) mutexRequest(name string) request {
	return request{ref: l.refs.get(mutexKind, name), permits: 1}
}

// Name is the mutex's name.
func (m *Mutex) Name() string { return m.req.ref.name }

// Acquire waits, in strict FIFO order among live waiters, until it holds
// the lock, and returns the lease. If ctx ends first, the error matches
// errors.Is(err, ctx.Err()) and the waiter has left the queue; a grant that
// raced with the cancellation is given back. Acquire is not reentrant: a
// second Acquire of a lock this Locker holds waits for it.
func (m *Mutex) Acquire(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return m.locker.acquire(ctx, m.req, true, opts)
}

// TryAcquire takes the lock only if it is free and nobody waits for it, and
// returns ErrNotAcquired otherwise. It never waits and never jumps the queue.
func (m *Mutex) TryAcquire(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return m.locker.acquire(ctx, m.req, false, opts)
}

// Do runs fn while holding the lock, then releases it, on every way out of
// fn, a panic included. fn's context is cancelled, with cause ErrLost, if
// the lease is lost; if it was lost while fn ran, the error matches
// ErrLost, joined with fn's own error. opts apply to the Acquire; a nil fn
// is ErrInvalid, and takes nothing.
func (m *Mutex) Do(ctx context.Context, fn func(ctx context.Context) error, opts ...AcquireOption) error {
	return do(ctx, m.locker.cfg.leaseTTL, fn, func() (*Lease, error) { return m.Acquire(ctx, opts...) })
}

// Inspect reads the mutex's holder and queue (see Locker.Inspect).
func (m *Mutex) Inspect(ctx context.Context) (State, error) {
	return m.locker.Inspect(ctx, LockMutex, m.Name())
}

// ForceRelease ends the grant called token, or whoever holds the mutex if
// token is "" (see Locker.ForceRelease, and read its warning).
func (m *Mutex) ForceRelease(ctx context.Context, token string) (ForceReleaseResult, error) {
	return m.locker.ForceRelease(ctx, LockMutex, m.Name(), token)
}
