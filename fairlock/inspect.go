package fairlock

import (
	"context"
	"time"
)

// State is a snapshot of one lock of any kind, as Inspect reads it in one
// round trip.
type State struct {
	Name string
	Lock LockKind // LockMutex, LockSemaphore, LockRWMutex or LockElection
	// Capacity is 1 for a mutex, MaxCapacity for a read-write lock, and a
	// semaphore's capacity in use (0 while it is idle).
	Capacity int
	InUse    int      // permits held; for a read-write lock, its holders
	Fence    int64    // the latest fence drawn, 0 if none is known
	Holders  []Holder // the live holders, at most MaxListed
	Waiters  []Waiter // the live waiters in queue order, at most MaxListed
	// Queued counts the waiters in all, with any not yet found dead.
	Queued int
}

// Held tells whether anyone holds the lock.
func (st State) Held() bool { return len(st.Holders) > 0 }

// A Holder is one live grant of a lock.
type Holder struct {
	Token    string
	Shared   bool          // a read-write lock's reader
	Permits  int           // n for a semaphore, else 1
	Fence    int64         // its grant's fence (a mutex's: the latest, which is at least its own)
	TTL      time.Duration // how long Redis keeps it if its Locker stops renewing
	Metadata string        // WithMetadata, "" if none
	Group    string        // WithGroup, "" if none
	Weight   int           // its group's weight (WithGroupWeight): 1 without one
	Priority int           // its request's priority (WithPriority)
	// Multi names the MultiMutex request it is a part of: the same in
	// each queue that request stands in, "" for a single request.
	Multi string
}

// A Waiter is one live waiter in a lock's queue. Its Position is 1 for
// the next; with groups, its place in arrival order; with priorities,
// every waiter of a priority above 0 comes first, in arrival order. Its
// Priority is its request's (WithPriority); while it waits, it ranks one
// level higher per aging (WithPriorityAging), up to MaxPriority.
type Waiter struct {
	Token    string // it becomes the lease's token when granted
	Shared   bool
	Permits  int
	Position int
	TTL      time.Duration // how long it keeps its place if its Locker stops
	Metadata string
	Group    string
	Weight   int
	Priority int
	Multi    string // as a Holder's
	// Waited is how long it has waited, by the Redis server's clock, to
	// the millisecond: since its request reached Redis, or since it was
	// queued again after its Locker lost its place.
	Waited time.Duration
}

// Inspect reads the state of the lock of kind k (LockMutex, LockSemaphore,
// LockRWMutex or LockElection) called name, in one round trip. It only reads
// (EVALSHA_RO), so it runs under a read-only ACL rule. Holders and waiters
// whose Locker died, not yet removed from Redis, are left out: they will
// never use the lock again. It needs no capacity: the semaphore's is read.
// A k that is none of Kinds is ErrInvalid.
func (l *Locker) Inspect(ctx context.Context, k LockKind, name string) (State, error) {
	ref, err := l.lockOfKind(k, name)
	if err != nil {
		return State{}, err
	}
	reply, err := ref.kind.scripts.Snapshot.run(ctx, l.client, ref.call(MaxListed), readOnly).Result()
	if err != nil {
		return State{}, failed("inspect", name, err)
	}
	st, ok := parseSnapshot(reply, ref.kind)
	if !ok {
		return State{}, badReply("inspect", reply)
	}
	st.Name = name
	return st, nil
}

// parseSnapshot reads snapshot.lua's reply.
func parseSnapshot(reply any, kd *kind) (State, bool) {
	arr, ok := reply.([]any)
	if !ok || len(arr) != 5 {
		return State{}, false
	}
	nums, err := parseInts(arr[:3], 3)
	if err != nil {
		return State{}, false
	}
	st := State{Lock: kd.lock, Capacity: int(nums[0]), Fence: nums[1], Queued: int(nums[2])}
	if kd.capacity > 0 {
		st.Capacity = kd.capacity
	}
	ok = records(arr[3], 6, func(f []any) bool {
		s, ok1 := strs(f[0], f[3], f[4])
		left, ok2 := millis(f[1])
		fence, ok3 := f[2].(int64)
		weight, ok4 := f[5].(int64)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return false
		}
		shared, permits := kd.request(s[0])
		st.Holders = append(st.Holders, Holder{Token: s[0], Shared: shared, Permits: permits, Fence: fence,
			TTL: left, Metadata: s[1], Group: s[2], Weight: int(weight), Priority: tokenPriority(s[0]), Multi: multiOf(s[0])})
		st.InUse += permits
		return true
	}) && records(arr[4], 6, func(f []any) bool {
		s, ok1 := strs(f[0], f[2], f[3])
		left, ok2 := millis(f[1])
		weight, ok3 := f[4].(int64)
		waited, ok4 := millis(f[5])
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return false
		}
		shared, permits := kd.request(s[0])
		st.Waiters = append(st.Waiters, Waiter{Token: s[0], Shared: shared, Permits: permits, Position: len(st.Waiters) + 1,
			TTL: left, Metadata: s[1], Group: s[2], Weight: int(weight), Priority: tokenPriority(s[0]), Multi: multiOf(s[0]), Waited: waited})
		return true
	})
	return st, ok
}

// lockOfKind checks what Inspect and ForceRelease take, a kind of lock
// and its name, and returns that lock's ref.
func (l *Locker) lockOfKind(k LockKind, name string) (*lockRef, error) {
	kd, err := kindOf(k)
	if err != nil {
		return nil, err
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	return l.refs.get(kd, name), nil
}

// permitsOf reads the permits a token asks for, after its '#'.
func permitsOf(token string) int {
	n := 0
	for i := len(token) - 1; i >= 0; i-- {
		if token[i] == '#' {
			for _, c := range token[i+1:] {
				if c < '0' || c > '9' {
					return 1
				}
				n = n*10 + int(c-'0')
			}
			return max(n, 1)
		}
		if token[i] == ':' {
			break
		}
	}
	return 1
}
