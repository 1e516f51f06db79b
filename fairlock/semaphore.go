package fairlock

import (
	"context"
	"fmt"
	"strconv"
)

// A Semaphore is a fair counting semaphore of one name, shared by every
// Locker on the same Redis: at most Capacity permits are held at once,
// within their leases, and requests are granted in strict FIFO order among
// live waiters. A request is granted only when it is the oldest live
// waiter and its permits are free: a later request never passes an earlier
// one, even when it would fit. A small request behind a large one waits,
// so that the large one is not starved by a stream of small ones that
// keep some permits taken at all times.
//
// When permits come free (a release, a holder that expired or died, a
// waiter that died at the head), every request at the head that now fits
// is granted in the same script, and each Locker with a granted waiter gets
// one message.
//
// With WithGroup, requests share the permits fairly between groups (see
// WithGroup), and WithGroupLimit caps each group.
//
// Every process must use the same capacity (and group limit) for a name.
// While the semaphore has holders or waiters, an Acquire with another
// fails with ErrInvalid and changes nothing; once it is idle, the next
// Acquire's capacity takes effect.
//
// A Semaphore, a Mutex and an RWMutex of the same name are independent of
// one another. A Semaphore is safe for concurrent use.
type Semaphore struct {
	locker   *Locker
	ref      *lockRef
	capacity int
	limit    int
}

// Semaphore returns the semaphore called name with capacity permits. It
// checks its arguments but does not contact Redis.
func (l *Locker) Semaphore(name string, capacity int, opts ...SemaphoreOption) (*Semaphore, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if capacity < 1 || capacity > MaxCapacity {
		return nil, fmt.Errorf("%w: semaphore capacity %d is not between 1 and MaxCapacity (%d)", ErrInvalid, capacity, MaxCapacity)
	}
	var cfg semaphoreConfig
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil semaphore option", ErrInvalid)
		}
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	return &Semaphore{locker: l, ref: l.refs.get(semaphoreKind, name), capacity: capacity, limit: cfg.groupLimit}, nil
}

// Name is the semaphore's name.
func (sem *Semaphore) Name() string { return sem.ref.name }

// Capacity is the number of permits the semaphore was made with.
func (sem *Semaphore) Capacity() int { return sem.capacity }

// request asks for n permits, after checking n.
func (sem *Semaphore) request(n int) (request, error) {
	if n < 1 || n > sem.capacity || (sem.limit > 0 && n > sem.limit) {
		bound := sem.capacity
		if sem.limit > 0 {
			bound = min(bound, sem.limit)
		}
		return request{}, fmt.Errorf("%w: %d permits of semaphore %s, which grants between 1 and %d", ErrInvalid, n, quoteName(sem.Name()), bound)
	}
	req := request{ref: sem.ref, permits: n, capacity: sem.capacity, limit: sem.limit}
	if n > 1 {
		req.suffix = "#" + strconv.Itoa(n)
	}
	return req, nil
}

// Acquire waits, in strict FIFO order among live waiters, until it holds n
// permits, and returns the lease; Release returns all n. If ctx ends first,
// the error matches errors.Is(err, ctx.Err()) and the waiter has left the
// queue; a grant that raced with the cancellation is given back. n must be
// between 1 and the capacity (and the group limit, if any).
func (sem *Semaphore) Acquire(ctx context.Context, n int, opts ...AcquireOption) (*Lease, error) {
	req, err := sem.request(n)
	if err != nil {
		return nil, err
	}
	return sem.locker.acquire(ctx, req, true, opts)
}

// TryAcquire takes n permits only if nobody waits and n are free, and
// returns ErrNotAcquired otherwise. It never waits and never jumps the
// queue.
func (sem *Semaphore) TryAcquire(ctx context.Context, n int, opts ...AcquireOption) (*Lease, error) {
	req, err := sem.request(n)
	if err != nil {
		return nil, err
	}
	return sem.locker.acquire(ctx, req, false, opts)
}

// Do runs fn while holding n permits, then releases them, on every way out
// of fn, a panic included (see Mutex.Do).
func (sem *Semaphore) Do(ctx context.Context, n int, fn func(ctx context.Context) error, opts ...AcquireOption) error {
	return do(ctx, sem.locker.cfg.leaseTTL, fn, func() (*Lease, error) { return sem.Acquire(ctx, n, opts...) })
}

// Inspect reads the semaphore's holders and queue (see Locker.Inspect).
func (sem *Semaphore) Inspect(ctx context.Context) (State, error) {
	return sem.locker.Inspect(ctx, LockSemaphore, sem.Name())
}

// ForceRelease ends the grant called token, or every grant if token is ""
// (see Locker.ForceRelease, and read its warning).
func (sem *Semaphore) ForceRelease(ctx context.Context, token string) (ForceReleaseResult, error) {
	return sem.locker.ForceRelease(ctx, LockSemaphore, sem.Name(), token)
}
