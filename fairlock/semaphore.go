package fairlock

import (
	"context"
	"fmt"
)

// MaxCapacity is the largest capacity a Semaphore takes. Permits are
// counted in Lua, whose numbers are exact integers up to 2^53; 2^30 leaves
// room for any sum of them. A read-write lock is a semaphore of this
// capacity whose writers take all of it.
const MaxCapacity = 1 << 30

// A Semaphore is a fair counting semaphore of one name, shared by every
// Locker on the same Redis: at most Capacity permits are held at once,
// within their leases, and requests are granted in strict FIFO order among
// live waiters. A request is granted only when it is the oldest live
// waiter and its permits are free: a later request never passes an earlier
// one, even when it would fit. A small request behind a large one waits,
// so that the large one is not starved by a stream of small ones that
// keep some permits taken at all times.
//
// When permits come free (a release, a holder that expired, a waiter that
// died at the head), every request at the head that now fits is granted in
// the same script, and each Locker with a granted waiter gets one message.
//
// Every process must use the same capacity for a name. While the semaphore
// has holders or waiters, an Acquire with another capacity fails with
// ErrInvalid and changes nothing; once it is idle, the next Acquire's
// capacity takes effect.
//
// A Semaphore, a Locker's mutex and an RWMutex of the same name are
// independent of one another. A Semaphore is safe for concurrent use.
type Semaphore struct {
	locker   *Locker
	name     string
	capacity int
}

// Semaphore returns the semaphore called name with capacity permits. It
// checks its arguments but does not contact Redis.
func (l *Locker) Semaphore(name string, capacity int) (*Semaphore, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if capacity < 1 || capacity > MaxCapacity {
		return nil, fmt.Errorf("%w: semaphore capacity %d is not between 1 and MaxCapacity (%d)", ErrInvalid, capacity, MaxCapacity)
	}
	return &Semaphore{locker: l, name: name, capacity: capacity}, nil
}

// Name is the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Capacity is the number of permits the semaphore was made with.
func (s *Semaphore) Capacity() int { return s.capacity }

// Acquire waits, in strict FIFO order among live waiters, until it holds n
// permits, and returns the lease; Release returns all n. If ctx ends first,
// the error matches errors.Is(err, ctx.Err()) and the waiter has left the
// queue; a grant that raced with the cancellation is given back. n must be
// between 1 and the capacity.
func (s *Semaphore) Acquire(ctx context.Context, n int, opts ...AcquireOption) (*Lease, error) {
	if err := s.check(n); err != nil {
		return nil, err
	}
	return s.locker.acquireKind(ctx, LockSemaphore, s.name, s.capacity, n, true, opts)
}

// TryAcquire takes n permits only if nobody waits and n are free, and
// returns ErrNotAcquired otherwise. It never waits and never jumps the
// queue.
func (s *Semaphore) TryAcquire(ctx context.Context, n int, opts ...AcquireOption) (*Lease, error) {
	if err := s.check(n); err != nil {
		return nil, err
	}
	return s.locker.acquireKind(ctx, LockSemaphore, s.name, s.capacity, n, false, opts)
}

func (s *Semaphore) check(n int) error {
	if n < 1 || n > s.capacity {
		return fmt.Errorf("%w: %d permits of semaphore %s, whose capacity is %d", ErrInvalid, n, quoteName(s.name), s.capacity)
	}
	return nil
}

// SemaphoreState is a snapshot of one semaphore, as Inspect reads it.
type SemaphoreState struct {
	Capacity int   // the capacity in use; 0 while the semaphore is idle
	InUse    int   // permits held
	Holders  int   // leases held
	Waiters  int   // live waiters queued
	Fence    int64 // fence of the latest grant
}

// Inspect reads the state of the semaphore in one round trip.
func (s *Semaphore) Inspect(ctx context.Context) (SemaphoreState, error) {
	c, err := s.locker.census(ctx, LockSemaphore, s.name)
	if err != nil {
		return SemaphoreState{}, err
	}
	return SemaphoreState{Capacity: c.capacity, InUse: c.inUse, Holders: c.holders, Waiters: c.waiters, Fence: c.fence}, nil
}
