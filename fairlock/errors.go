package fairlock

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
)

// Errors returned by fairlock; match them with errors.Is.
var (
	// ErrNotAcquired is returned by TryAcquire when the lock is held or
	// anyone is waiting for it.
	ErrNotAcquired = errors.New("fairlock: not acquired")
	// ErrNotHeld is returned by Release and Extend when the lease was
	// already released or lost; nothing was changed in Redis.
	ErrNotHeld = errors.New("fairlock: lease not held")
	// ErrLost means a lease ended without Release: its renewal failed, it
	// expired, it was ended by force, or Redis no longer knows it (a
	// restart, a failover).
	ErrLost = errors.New("fairlock: lease lost")
	// ErrReleased is what Lease.Err reports after Release.
	ErrReleased = errors.New("fairlock: lease released")
	// ErrClosed is returned by calls on a closed Locker, and by Acquire
	// calls that were waiting when it was closed.
	ErrClosed = errors.New("fairlock: locker closed")
	// ErrPlaceLost is the Err of an EventCancelled that does not end the
	// Acquire: the waiter lost its place in the queue (Redis forgot it, or
	// its session ended) and queues again at the back. Acquire never
	// returns it.
	ErrPlaceLost = errors.New("fairlock: waiter lost its place in the queue")
	// ErrInvalid wraps every error about a bad argument or option.
	ErrInvalid = errors.New("fairlock: invalid argument")
	// ErrUnsafeEviction is returned by every acquire on a Redis that may
	// evict keys (maxmemory set, and a maxmemory-policy other than
	// noeviction): an evicted lock key would let a second holder in. Set
	// maxmemory-policy noeviction, or accept the risk with
	// WithUnsafeEviction.
	ErrUnsafeEviction = errors.New("fairlock: Redis may evict keys")
	// ErrNotReplicated is returned by Acquire and TryAcquire under
	// WithReplicaAck when too few replicas acknowledged the grant in time;
	// the grant was released.
	ErrNotReplicated = errors.New("fairlock: grant not acknowledged by enough replicas")
	// ErrNoLeader is returned by Election.Leader when nobody leads: no
	// candidate holds the election, or the one that was just elected has
	// not published its value yet.
	ErrNoLeader = errors.New("fairlock: no leader")
)

// An opError is the error of one operation on one lock: "fairlock: <op>:
// <cause>", where a cause of fairlock's own loses its "fairlock: ", so that
// the prefix shows once.
type opError struct {
	op  string
	err error
}

func (e *opError) Error() string {
	return "fairlock: " + e.op + ": " + strings.TrimPrefix(e.err.Error(), "fairlock: ")
}

func (e *opError) Unwrap() error { return e.err }

// failed wraps err as the failure of op on the lock called name.
func failed(op, name string, err error) error {
	return &opError{op: op + " " + quoteName(name), err: err}
}

// isRedisError tells an error reply of Redis, which means it ran the
// command, from an error of the network or the client, which may mean it
// did not.
func isRedisError(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && !errors.Is(err, redis.ErrClosed)
}

// quotedNameLen is how much of a lock name errors and log lines show.
const quotedNameLen = 32

// quoteName quotes a lock name for an error or log line: whole if short,
// else its first quotedNameLen bytes and its length, so that a huge name
// cannot flood a log.
func quoteName(name string) string {
	if len(name) <= quotedNameLen {
		return strconv.Quote(name)
	}
	cut := quotedNameLen
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return strconv.Quote(name[:cut]+"…") + " (" + byteSize(len(name)) + ")"
}

// byteSize writes n bytes the way people read sizes: "600 MiB", "4.5 KiB".
func byteSize(n int) string {
	units := []string{"bytes", "KiB", "MiB", "GiB"}
	size, unit := float64(n), 0
	for size >= 1024 && unit < len(units)-1 {
		size /= 1024
		unit++
	}
	return strings.TrimSuffix(strconv.FormatFloat(size, 'f', 1, 64), ".0") + " " + units[unit]
}
