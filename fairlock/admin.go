package fairlock

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Operations for operators: a forced release and the locks in use, on
// every kind of lock. They need no lease of their own, so a tool can run
// them on a Locker made just for that.

// ForceReleaseResult says what ForceRelease did.
type ForceReleaseResult struct {
	Ended   []string // tokens of the grants that were ended
	Granted []Grant  // the waiters granted next, in order
}

// A Grant is one waiter granted a lock, and its fence.
type Grant struct {
	Token string
	Fence int64
}

// ForceRelease ends the grant called token of the lock of kind k
// (LockMutex, LockSemaphore, LockRWMutex or LockElection) called name,
// whoever holds it, or every grant when token is "", and grants the
// waiters that now fit, in order, as a release would; their fences are
// larger than the ended ones.
// Naming the token ends the holder an operator saw and not the one after
// it. It returns ErrNotHeld, changing nothing, when there is no such
// grant, and ErrInvalid for a k that is none of Kinds.
//
// This is dangerous. The ended holder's Locker learns at its next
// heartbeat, and its lease ends with ErrLost. Until then two parties
// believe they hold the lock. Only storage that rejects writes with an
// older fence (Lease.Fence) is protected; use ForceRelease for a holder
// that is stuck, not one that is slow.
func (l *Locker) ForceRelease(ctx context.Context, k LockKind, name, token string) (ForceReleaseResult, error) {
	ref, err := l.lockOfKind(k, name)
	if err != nil {
		return ForceReleaseResult{}, err
	}
	reply, err := ref.kind.scripts.ForceRelease.run(ctx, l.client, ref.call(token), retried).Result()
	if err != nil {
		return ForceReleaseResult{}, failed("force release", name, err)
	}
	r, ok := parseForceRelease(reply)
	if !ok {
		return ForceReleaseResult{}, badReply("force release", reply)
	}
	if len(r.Ended) == 0 {
		return r, ErrNotHeld
	}
	return r, nil
}

// parseForceRelease reads force_release.lua's reply.
func parseForceRelease(reply any) (ForceReleaseResult, bool) {
	arr, ok := reply.([]any)
	if !ok || len(arr) != 2 {
		return ForceReleaseResult{}, false
	}
	var r ForceReleaseResult
	ok = records(arr[0], 1, func(f []any) bool {
		token, ok := f[0].(string)
		r.Ended = append(r.Ended, token)
		return ok
	}) && records(arr[1], 2, func(f []any) bool {
		token, ok1 := f[0].(string)
		fence, ok2 := f[1].(int64)
		r.Granted = append(r.Granted, Grant{token, fence})
		return ok1 && ok2
	})
	return r, ok
}

// A LockInUse is one lock that has a holder or a queue.
type LockInUse struct {
	Name string
	Lock LockKind // LockMutex, LockSemaphore, LockRWMutex or LockElection
}

// Locks returns, sorted by name and kind, the locks of every kind under
// this Locker's key prefix that have a holder or a queue, on every primary
// of a Redis Cluster. It scans with SCAN, never KEYS, so Redis keeps
// serving others meanwhile; a lock taken or freed during the scan may be
// missed or listed. A lock whose holders and waiters all died stays listed
// until its keys expire, or the next call on it finds them dead.
func (l *Locker) Locks(ctx context.Context) ([]LockInUse, error) {
	var mu sync.Mutex // ForEachMaster scans the primaries in parallel
	found := map[LockInUse]bool{}
	// One pass over the prefix's keys, each told apart by its suffix: a
	// lock in use has holders or waiters, so its holders' key or its order
	// set.
	match := globEscaper.Replace(keyBase(l.cfg.prefix)) + "{*}:*"
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, match, 1000).Iterator()
		for iter.Next(ctx) {
			if lk, ok := lockOfKey(l.cfg.prefix, iter.Val()); ok {
				mu.Lock()
				found[lk] = true
				mu.Unlock()
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
		return nil, &opError{op: "locks", err: err}
	}
	locks := make([]LockInUse, 0, len(found))
	for lk := range found {
		locks = append(locks, lk)
	}
	slices.SortFunc(locks, func(a, b LockInUse) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return int(a.Lock) - int(b.Lock)
	})
	return locks, nil
}

// lockOfKey tells which lock key is the holders' key or the order set of,
// under prefix.
func lockOfKey(prefix, key string) (LockInUse, bool) {
	for _, k := range kinds {
		for _, suffix := range [...]string{k.space + k.holdersKey(), k.space + "order"} {
			if name, ok := nameFromKey(prefix, suffix, key); ok {
				return LockInUse{name, k.lock}, true
			}
		}
	}
	return LockInUse{}, false
}

// globEscaper makes a string match only itself in a SCAN MATCH pattern.
var globEscaper = strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)
