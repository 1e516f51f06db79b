package fairlock

import (
	"fmt"
	"strings"
)

// A kind is one kind of lock. The queue engine is the same for all of
// them; a kind answers every question on which they differ, and the code
// asks it rather than telling kinds apart. Every kind is in kinds.
type kind struct {
	lock LockKind // its value in Event, State and LockInUse
	name string   // LockKind.String
	// space is the key space of its locks (keys.go): what their keys have
	// between the name and the key's own name, so that locks of one name
	// and two kinds are independent of one another.
	space   string
	scripts *scriptSet // its holder store's scripts
	// holderSet says how its holder store keeps its holders: as members
	// of a sorted set of tokens, each with its record's deadline, and
	// their fences in the state hash (the counted store); else as the
	// value of one string key, the record, which keeps no fence of its
	// own (the mutex's store). It names the holders' key, the heartbeat's
	// read-back of leases and what Inspect knows of a holder's fence.
	holderSet bool
	// capacity is the permits of each lock of the kind, as Inspect reports
	// them; 0 when each lock has its own, which Inspect reads from Redis
	// (a semaphore's).
	capacity int
	// shared says that a request for fewer permits than capacity shares
	// the lock (a read-write lock's reader) and one for all of them
	// excludes every other holder (a writer). Each counts as one permit
	// where its permits are reported; without shared, a request's permits
	// are those its token asks for.
	shared bool
	// The options its requests take beside the common ones: WithGroup and
	// WithGroupWeight (groups), WithPriority (priorities).
	groups, priorities bool
	// fast says that the fast path serves it (fastpath.go): a mutex's
	// store takes a free lock without a script.
	fast bool
}

var (
	mutexKind = &kind{lock: LockMutex, name: "mutex", space: "", scripts: mutexScripts,
		capacity: 1, priorities: true, fast: true}
	semaphoreKind = &kind{lock: LockSemaphore, name: "semaphore", space: "sem:", scripts: countedScripts,
		holderSet: true, groups: true, priorities: true}
	rwKind = &kind{lock: LockRWMutex, name: "rwmutex", space: "rw:", scripts: countedScripts,
		holderSet: true, capacity: MaxCapacity, shared: true}
	// An election is a mutex in a key space of its own, beside which its
	// leader keeps its record and log (election.go).
	electionKind = &kind{lock: LockElection, name: "election", space: "elect:", scripts: mutexScripts,
		capacity: 1, fast: true}
)

// kinds are every kind of lock, in the order tools show them. A kind is
// registered here and nowhere else; a test may add one in its init.
var kinds = []*kind{mutexKind, semaphoreKind, rwKind, electionKind}

// kindOf returns the kind of the locks of lk; ErrInvalid if lk is none.
func kindOf(lk LockKind) (*kind, error) {
	for _, k := range kinds {
		if k.lock == lk {
			return k, nil
		}
	}
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.name
	}
	return nil, fmt.Errorf("%w: lock kind %d is none of the kinds of lock (%s)", ErrInvalid, int(lk), strings.Join(names, ", "))
}

// holdersKey is the name of its locks' holders' key, after the key space.
func (k *kind) holdersKey() string {
	if k.holderSet {
		return "holders"
	}
	return "lock"
}

// request tells what a token of a lock of kind k asks for: whether it
// shares the lock, and its permits as Holder and Waiter report them.
func (k *kind) request(token string) (shared bool, permits int) {
	n := permitsOf(token)
	if k.shared {
		return n < k.capacity, 1
	}
	return false, n
}

// KindInfo describes a kind of lock: what Inspect reports of its locks,
// and what its requests take. Tools that show or count every kind (the
// fairlock command, fairlocktest, contrib/otel) read it rather than name
// each kind.
type KindInfo struct {
	Lock LockKind
	// Capacity is the permits of every lock of the kind: 1 for a mutex,
	// MaxCapacity for a read-write lock; 0 when each lock has its own (a
	// semaphore's, which State.Capacity reports).
	Capacity int
	// Shared says that its requests may share a lock (a read-write lock's
	// readers: Event.Shared, Holder.Shared); the others take all of
	// Capacity.
	Shared bool
	// Groups says that its requests take WithGroup and WithGroupWeight;
	// Priorities, that they take WithPriority.
	Groups, Priorities bool
	// HolderFences says that Inspect reports each holder's own fence in
	// Holder.Fence; without it, Holder.Fence is the latest fence drawn,
	// which is at least the holder's (a mutex's).
	HolderFences bool
}

// Kinds describes every kind of lock, in the order tools show them:
// LockMutex, LockSemaphore, LockRWMutex, LockElection.
func Kinds() []KindInfo {
	out := make([]KindInfo, len(kinds))
	for i, k := range kinds {
		out[i] = k.info()
	}
	return out
}

// Info describes the kind k; ErrInvalid if k is none of Kinds.
func (k LockKind) Info() (KindInfo, error) {
	kd, err := kindOf(k)
	if err != nil {
		return KindInfo{}, err
	}
	return kd.info(), nil
}

func (k *kind) info() KindInfo {
	return KindInfo{Lock: k.lock, Capacity: k.capacity, Shared: k.shared, Groups: k.groups, Priorities: k.priorities, HolderFences: k.holderSet}
}
