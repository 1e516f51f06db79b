package fairlock

import (
	"context"
	"fmt"
	"strconv"
)

// The semaphore and the read-write lock run on the mutex's queue engine
// with another holder store (scripts/lib/counted/): a sorted set
// of holders and a count of the permits they hold. A token carries the
// permits it asks for after a '#'; a writer asks for MaxCapacity, all of a
// read-write lock's.

// acquireKind is Acquire or TryAcquire (wait false) of n permits of the
// semaphore or read-write lock called name, as kind says, whose capacity
// is capacity. Its arguments are checked.
func (l *Locker) acquireKind(ctx context.Context, kind LockKind, name string, capacity, n int, wait bool, opts []AcquireOption) (*Lease, error) {
	req := request{kind: kind, permits: 1, capacity: capacity}
	switch kind {
	case LockSemaphore:
		req.ref, req.permits = l.ref(spaceSemaphore, name), n
	default:
		req.ref = l.ref(spaceRW, name)
	}
	if n > 1 {
		req.suffix = "#" + strconv.Itoa(n)
	}
	return l.acquire(ctx, req, wait, opts)
}

// census is census.lua's reply.
type census struct {
	capacity, inUse, holders, waiters int
	fence                             int64
}

// census reads the state of the semaphore (kind LockSemaphore) or
// read-write lock called name in one round trip, read-only (EVALSHA_RO),
// so that an operator's read-only ACL rule allows it.
func (l *Locker) census(ctx context.Context, kind LockKind, name string) (census, error) {
	space := spaceRW
	if kind == LockSemaphore {
		space = spaceSemaphore
	}
	reply, err := l.readOnly(ctx, censusScript, l.ref(space, name).keys)
	if err != nil {
		return census{}, fmt.Errorf("fairlock: inspect %s: %w", quoteName(name), err)
	}
	return parseCensus(reply)
}

// parseCensus reads census.lua's reply.
func parseCensus(reply any) (census, error) {
	n, err := parseInts(reply, 5)
	if err != nil {
		return census{}, err
	}
	for _, v := range n {
		if v < 0 {
			return census{}, fmt.Errorf("fairlock: unexpected inspect reply %v", reply)
		}
	}
	return census{capacity: int(n[0]), inUse: int(n[1]), holders: int(n[2]), waiters: int(n[3]), fence: n[4]}, nil
}
