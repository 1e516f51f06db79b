package fairlock

import "context"

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
// downgrade: release one lease and acquire the other.
//
// An RWMutex, a Locker's mutex and a Semaphore of the same name are
// independent of one another. An RWMutex is safe for concurrent use.
type RWMutex struct {
	locker *Locker
	name   string
}

// RWMutex returns the read-write lock called name. It checks the name but
// does not contact Redis.
func (l *Locker) RWMutex(name string) (*RWMutex, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	return &RWMutex{locker: l, name: name}, nil
}

// Name is the lock's name.
func (m *RWMutex) Name() string { return m.name }

// Lock waits, in FIFO order, until it holds the lock alone, and returns the
// lease. If ctx ends first, the error matches errors.Is(err, ctx.Err()) and
// the waiter has left the queue.
func (m *RWMutex) Lock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return m.locker.acquireKind(ctx, LockWrite, m.name, MaxCapacity, MaxCapacity, true, opts)
}

// RLock waits, in FIFO order, until it holds the lock shared with other
// readers, and returns the lease.
func (m *RWMutex) RLock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return m.locker.acquireKind(ctx, LockRead, m.name, MaxCapacity, 1, true, opts)
}

// TryLock takes the lock alone only if nobody holds it or waits for it, and
// returns ErrNotAcquired otherwise. It never waits.
func (m *RWMutex) TryLock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return m.locker.acquireKind(ctx, LockWrite, m.name, MaxCapacity, MaxCapacity, false, opts)
}

// TryRLock takes the lock shared only if no writer holds it and nobody
// waits for it, and returns ErrNotAcquired otherwise. It never waits and
// never jumps the queue.
func (m *RWMutex) TryRLock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return m.locker.acquireKind(ctx, LockRead, m.name, MaxCapacity, 1, false, opts)
}

// RWState is a snapshot of one read-write lock, as Inspect reads it.
type RWState struct {
	Writer  bool  // a writer holds it
	Readers int   // readers holding it
	Waiters int   // live waiters queued, readers and writers
	Fence   int64 // fence of the latest grant
}

// Inspect reads the state of the lock in one round trip.
func (m *RWMutex) Inspect(ctx context.Context) (RWState, error) {
	c, err := m.locker.census(ctx, LockWrite, m.name)
	if err != nil {
		return RWState{}, err
	}
	st := RWState{Waiters: c.waiters, Fence: c.fence}
	if c.inUse >= MaxCapacity {
		st.Writer = true
	} else {
		st.Readers = c.holders
	}
	return st, nil
}
