package fairlock

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fairlock/fairlock/scripts"
	"github.com/redis/go-redis/v9"
)

// Operations for operators: the whole queue of a lock, a forced release,
// and the names of the locks in use. They need no lease of their own, so a
// tool can run them on a Locker made just for that.

var (
	queueScript        = redis.NewScript(scripts.Queue)
	censusScript       = redis.NewScript(scripts.Census)
	forceReleaseScript = redis.NewScript(scripts.ForceRelease)
)

// MaxQueueListed is the most waiters Queue lists: a reply for a queue of a
// million waiters would hold Redis for a long time. QueueState.Waiters
// still counts them all.
const MaxQueueListed = 1000

// QueueState is one lock's holder and waiters, as Queue reads them.
type QueueState struct {
	State                // holder, fence, lease left; Waiters counts every live waiter
	Queue []QueuedWaiter // the first live waiters in queue order, at most MaxQueueListed
}

// A QueuedWaiter is one live waiter in a lock's queue.
type QueuedWaiter struct {
	Token    string        // the waiter's token; it becomes the lease token when granted
	Metadata string        // the waiter's metadata (WithMetadata), "" if none
	Position int           // 1 is next, counting only live waiters
	Deadline time.Duration // time left until its heartbeat deadline; it loses its place then
}

// Queue reads the holder and the queue of the lock called name in one
// round trip. Waiters whose heartbeat deadline has passed, dead but not yet
// removed from Redis, are left out: they will never be granted. The read
// looks at no more than 10 × MaxQueueListed queue entries, so fewer waiters
// may be listed behind a long run of dead ones. Queue only reads
// (EVALSHA_RO), so it runs under a read-only ACL rule.
func (l *Locker) Queue(ctx context.Context, name string) (QueueState, error) {
	if err := checkName(name); err != nil {
		return QueueState{}, err
	}
	reply, err := l.readOnly(ctx, queueScript, lockKeys(l.cfg.prefix, spaceMutex, name), MaxQueueListed)
	if err != nil {
		return QueueState{}, fmt.Errorf("fairlock: queue %s: %w", quoteName(name), err)
	}
	return parseQueue(reply)
}

// readOnly runs a script that only reads, with EVALSHA_RO, so that it runs
// under a read-only ACL rule.
func (l *Locker) readOnly(ctx context.Context, script *redis.Script, keys []string, args ...any) (any, error) {
	reply, err := script.RunRO(ctx, l.client, keys, args...).Result()
	if err != nil && strings.Contains(err.Error(), "not allowed in read-only scripts") {
		// miniredis (so fairlocktest) counts TIME as a write; Redis does not.
		reply, err = script.Run(ctx, l.client, keys, args...).Result()
	}
	return reply, err
}

// parseQueue reads queue.lua's reply.
func parseQueue(reply any) (QueueState, error) {
	bad := func() error { return fmt.Errorf("fairlock: unexpected queue reply %v", reply) }
	arr, ok := reply.([]any)
	if !ok || len(arr) != 6 {
		return QueueState{}, bad()
	}
	st, err := parseState(arr[:5])
	if err != nil {
		return QueueState{}, err
	}
	listed, ok := arr[5].([]any)
	if !ok || len(listed)%3 != 0 {
		return QueueState{}, bad()
	}
	q := QueueState{State: st, Queue: make([]QueuedWaiter, 0, len(listed)/3)}
	for i := 0; i < len(listed); i += 3 {
		token, tok := listed[i].(string)
		left, lok := listed[i+1].(int64)
		meta, mok := listed[i+2].(string)
		if !tok || !lok || !mok {
			return QueueState{}, bad()
		}
		q.Queue = append(q.Queue, QueuedWaiter{Token: token, Metadata: meta, Position: len(q.Queue) + 1, Deadline: time.Duration(left) * time.Millisecond})
	}
	return q, nil
}

// ForceReleaseResult says what ForceRelease did.
type ForceReleaseResult struct {
	Ended  string // token of the lease that was ended
	Holder string // token of the waiter granted the lock next, "" if nobody waited
	Fence  int64  // the new holder's fence, 0 if nobody waited
}

// ForceRelease ends the current lease of the lock called name on the
// server, whoever holds it, and grants the lock to the next live waiter in
// order, as a release would; the new holder's fence is larger than the old
// one's. If holder is not empty, only a lease with that token is ended, so
// an operator who looked at the lock ends the holder they saw and not the
// one after it. It returns ErrNotHeld, changing nothing, when there is no
// such lease.
//
// This is dangerous. The old holder is not told: it learns at its next
// heartbeat (its lease then ends with ErrLost; its Release and Extend
// return ErrNotHeld), or with auto-renew off only at its next Extend or
// Release or its lease's end. Until then two parties believe they hold the
// lock. Only storage that rejects writes with an older fence (Lease.Fence)
// is protected; use ForceRelease for a holder that is stuck, not one that
// is slow.
func (l *Locker) ForceRelease(ctx context.Context, name, holder string) (ForceReleaseResult, error) {
	if err := checkName(name); err != nil {
		return ForceReleaseResult{}, err
	}
	keys := lockKeys(l.cfg.prefix, spaceMutex, name)
	notifyCmd, notifyPrefix := l.notifyArgs(keys)
	reply, err := forceReleaseScript.Run(ctx, l.client, keys, notifyCmd, notifyPrefix, holder).Result()
	if err != nil {
		return ForceReleaseResult{}, fmt.Errorf("fairlock: force release %s: %w", quoteName(name), err)
	}
	r, err := parseForceRelease(reply)
	if err == nil && r.Ended == "" {
		err = ErrNotHeld
	}
	return r, err
}

// parseForceRelease reads force_release.lua's reply.
func parseForceRelease(reply any) (ForceReleaseResult, error) {
	arr, ok := reply.([]any)
	var r ForceReleaseResult
	if ok && len(arr) == 3 {
		r.Ended, ok = arr[0].(string)
		if ok {
			r.Holder, ok = arr[1].(string)
		}
		if ok {
			r.Fence, ok = arr[2].(int64)
		}
	}
	if !ok || len(arr) != 3 {
		return ForceReleaseResult{}, fmt.Errorf("fairlock: unexpected force release reply %v", reply)
	}
	return r, nil
}

// A LockInUse is one lock that has a holder or a queue.
type LockInUse struct {
	Name string
	Kind LockKind // LockMutex, LockSemaphore or LockRWMutex
}

// Locks returns, sorted by name and kind, the locks of every kind under
// this Locker's key prefix that have a holder or a queue, on every primary
// of a Redis Cluster. It scans with SCAN, never KEYS, so Redis keeps
// serving others meanwhile; a lock taken or freed during the scan may be
// missed or listed. A queue whose waiters all died stays listed until it
// expires, within the waiter TTL.
func (l *Locker) Locks(ctx context.Context) ([]LockInUse, error) {
	var mu sync.Mutex // ForEachMaster scans the primaries in parallel
	found := map[LockInUse]bool{}
	kinds := []struct {
		kind   LockKind
		suffix string // what a key of that kind ends with, after the name's "}:"
	}{
		{LockMutex, "lock"}, {LockMutex, "queue"},
		{LockSemaphore, spaceSemaphore + "holders"}, {LockSemaphore, spaceSemaphore + "queue"},
		{LockRWMutex, spaceRW + "holders"}, {LockRWMutex, spaceRW + "queue"},
	}
	// One pass over the prefix's keys, each told apart by its suffix.
	match := globEscaper.Replace(keyBase(l.cfg.prefix)) + "{*}:*"
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, match, 1000).Iterator()
		for iter.Next(ctx) {
			for _, k := range kinds {
				if name, ok := nameFromKey(l.cfg.prefix, k.suffix, iter.Val()); ok {
					mu.Lock()
					found[LockInUse{name, k.kind}] = true
					mu.Unlock()
					break
				}
			}
		}
		return iter.Err()
	}
	var err error
	switch c := l.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		err = fmt.Errorf("%w: listing locks needs a *redis.Client or *redis.ClusterClient, not %T", ErrInvalid, l.client)
	}
	if err != nil {
		return nil, fmt.Errorf("fairlock: locks: %w", err)
	}
	locks := make([]LockInUse, 0, len(found))
	for lk := range found {
		locks = append(locks, lk)
	}
	slices.SortFunc(locks, func(a, b LockInUse) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return int(a.Kind) - int(b.Kind)
	})
	return locks, nil
}

// Names returns, sorted, the names of the locks of any kind that Locks
// lists.
func (l *Locker) Names(ctx context.Context) ([]string, error) {
	locks, err := l.Locks(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, lk := range locks {
		if len(names) == 0 || names[len(names)-1] != lk.Name {
			names = append(names, lk.Name)
		}
	}
	return names, nil
}

// globEscaper makes a string match only itself in a SCAN MATCH pattern.
var globEscaper = strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)

// parseState reads the reply of inspect.lua, or the first five fields of
// queue.lua's, which are the same.
func parseState(reply any) (State, error) {
	holder, meta, ttl, fence, waiters, err := parseInspect(reply)
	if err != nil {
		return State{}, err
	}
	st := State{Held: holder != "", Holder: holder, Metadata: meta, Fence: fence, Waiters: int(waiters)}
	if st.Held && ttl > 0 {
		st.TTL = time.Duration(ttl) * time.Millisecond
	}
	return st, nil
}
