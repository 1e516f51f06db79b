package fairlock

import (
	"time"
)

// EventKind says what an Event reports.
type EventKind int

// The kinds of Event.
const (
	EventEnqueued        EventKind = iota + 1 // a waiter joined the queue; Position
	EventGranted                              // a lease was granted; Fence, Wait, Queued
	EventReleased                             // a lease was released; Fence, Held
	EventLost                                 // a lease was lost; Fence, Held, Err
	EventRenewed                              // a lease's record was renewed by the heartbeat (every third of the record's TTL)
	EventHeartbeatFailed                      // a heartbeat call failed; Err
	EventCancelled                            // a waiter gave up or lost its place; Err, Wait, Queued
	EventMoved                                // the place of a waiter that asked for it (OnPosition) changed; Position
	EventWarning                              // the Locker goes on despite a risk it found in Redis's settings, or gave a session up because Redis lost writes it had answered; Err
)

var eventNames = [...]string{"", "enqueued", "granted", "released", "lost", "renewed", "heartbeat-failed", "cancelled", "moved", "warning"}

// String is the kind's name as log lines show it: "enqueued", "granted",
// "released", "lost", "renewed", "heartbeat-failed", "cancelled", "moved",
// "warning", or "unknown" for a value that is none of the kinds.
func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "unknown"
}

// LockKind says which primitive a lock is.
type LockKind int

// The kinds of lock.
const (
	LockMutex     LockKind = iota + 1 // Locker.Mutex, and Locker.Acquire, TryAcquire, Do
	LockSemaphore                     // Locker.Semaphore
	LockRWMutex                       // Locker.RWMutex
	LockElection                      // Locker.Election: its leader is its holder, its candidates its waiters
)

// String is the kind's name as log lines show it: "mutex", "semaphore",
// "rwmutex", "election", or "unknown" for a value that is none of the
// kinds.
func (k LockKind) String() string {
	if kd, err := kindOf(k); err == nil {
		return kd.name
	}
	return "unknown"
}

// An Event is one step in the life of a waiter or lease, as seen by this
// Locker. Observers get them through WithObserver.
//
// Every Acquire or TryAcquire that reaches Redis ends in exactly one
// EventGranted or EventCancelled, except a TryAcquire refused with
// ErrNotAcquired, which reports nothing. An Acquire whose pub/sub
// subscription fails ends as EventCancelled too. A call that fails before
// it reaches Redis (a bad name, a context already done, a closed Locker)
// reports nothing: it never waited. So does a semaphore's Acquire that Redis
// refused because the semaphore is in use with another capacity. A grant
// that Acquire gives up before returning it (the Locker was closed, or
// WithReplicaAck was not met) ends as EventCancelled, and its lease reports
// no EventReleased or EventLost; every lease Acquire returns reports exactly
// one of them.
//
// Before its end, an Acquire may report EventCancelled events whose Err
// matches ErrPlaceLost. They are not its end: the waiter lost its place
// (Redis forgot it, or its grant expired before it heard of it) and the same
// call queues again under a new token, reporting a new EventEnqueued. Count
// them as the waiter leaving the queue, not as an outcome.
//
// To keep a count of waiters queued, add one on EventEnqueued and take one
// away on EventGranted and EventCancelled that have Queued set. A grant or a
// failure on the first round trip never queued and has Queued false.
//
// The observer is called synchronously, with no lock of the Locker held, on
// whichever goroutine made the step: the caller's goroutine of Acquire,
// TryAcquire, Do, Release, Extend or Close for most events; the Locker's
// heartbeat goroutine for EventRenewed, EventHeartbeatFailed, EventMoved and an
// EventLost found by the heartbeat; the lease's expiry timer for an
// EventLost at the lease's local deadline; and a short-lived goroutine
// started by Acquire for an EventCancelled that removes the waiter from
// Redis (Acquire waits for it at most one heartbeat, so that event may come
// after Acquire returned). The pub/sub listener calls it for nothing: a
// grant message wakes the waiting Acquire, which reports the grant. Events
// of one Locker may thus arrive concurrently, and those of different
// waiters in any order. The observer must be safe for concurrent use and
// must not block: a slow one delays grants and heartbeats, and a heartbeat
// delayed past the TTLs loses waiters and leases.
type Event struct {
	Kind     EventKind // what happened
	Name     string    // lock name
	Lock     LockKind  // which primitive
	Shared   bool      // a read-write lock's reader (RLock, TryRLock, DoRead), which shares it
	Permits  int       // permits asked for or held: n for LockSemaphore, else 1
	Group    string    // the request's group (WithGroup), "" if none
	Weight   int       // the weight its request gave the group (WithGroupWeight, 1 by default), 0 without a group
	Priority int       // the request's priority (WithPriority)
	Token    string    // the waiter's or lease's token
	Multi    string    // the MultiMutex request it is a part of (Holder.Multi), "" if none
	Position int       // EventEnqueued, EventMoved: 1 is next in line
	Fence    int64     // EventGranted, EventReleased, EventLost
	// Wait is, for EventGranted and EventCancelled, the time from the
	// Acquire or TryAcquire call to the grant or to giving up.
	Wait time.Duration
	// Held is, for EventReleased and EventLost, the time from the grant
	// (when Acquire returned the lease) to the release or loss.
	Held time.Duration
	// Queued is, for EventGranted and EventCancelled, whether this waiter
	// had been reported by EventEnqueued and has now left the queue.
	Queued bool
	// Err is why, for EventLost (ErrLost), EventReleased (ErrReleased),
	// EventHeartbeatFailed (the Redis error) and EventCancelled: the
	// context's error, ErrClosed, ErrPlaceLost, or a Redis error, possibly
	// joined with the error of leaving the queue. Match it with errors.Is.
	Err error
}

// logName is a lock name as log lines show it: as it is if short, else
// quoted, cut, and with its length (see quoteName).
func logName(name string) string {
	if len(name) <= quotedNameLen {
		return name
	}
	return quoteName(name)
}
