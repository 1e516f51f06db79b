package fairlock

import "errors"

// Errors returned by fairlock; match them with errors.Is.
var (
	// ErrNotAcquired is returned by TryAcquire when the lock is held or
	// anyone is waiting for it.
	ErrNotAcquired = errors.New("fairlock: not acquired")
	// ErrNotHeld is returned by Release and Extend when the lease was
	// already released or lost; nothing was changed in Redis.
	ErrNotHeld = errors.New("fairlock: lease not held")
	// ErrLost means a lease ended without Release: its renewal failed, it
	// expired, or Redis no longer knows it (a restart, a failover).
	ErrLost = errors.New("fairlock: lease lost")
	// ErrReleased is what Lease.Err reports after Release.
	ErrReleased = errors.New("fairlock: lease released")
	// ErrClosed is returned by calls on a closed Locker, and by Acquire
	// calls that were waiting when it was closed.
	ErrClosed = errors.New("fairlock: locker closed")
	// ErrPlaceLost is the Err of an EventCancelled that does not end the
	// Acquire: the waiter lost its place in the queue (Redis forgot it, or
	// its grant expired before it heard of it) and queues again at the
	// back. Acquire never returns it.
	ErrPlaceLost = errors.New("fairlock: waiter lost its place in the queue")
	// ErrInvalid wraps every error about a bad argument or option.
	ErrInvalid = errors.New("fairlock: invalid argument")
)
