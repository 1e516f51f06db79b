package fairlock

import (
	"sync"
	"sync/atomic"
	"time"
)

// A lockRef is what every script call on one lock needs, worked out once
// per name: its keys and the arguments every script takes first, boxed as
// command arguments, and where its grant notifications go.
type lockRef struct {
	name  string
	kind  *kind
	keys  []string
	args  []any  // keys, then the ARGV every script starts with (scripts/lib/keys.lua)
	scope string // the session that serves it: "" on one Redis, its name on Cluster
	// sessions is what its sessions' keys start with, and channel this
	// Locker's channel for its grants.
	sessions, channel string
	// busyUntil is when the fast path is worth trying again (unix ns),
	// after it found the lock held or waited for; trying is set while a
	// call tries it (fastpath.go).
	busyUntil atomic.Int64
	trying    atomic.Bool
	// local is this Locker's record of the lock while on its books
	// (books.local).
	local localLock
	// counts are the capacity and group limit its calls last sent, boxed
	// (countArgs).
	counts atomic.Pointer[countArgs]
}

// call returns the arguments of one script call on the lock: the three
// slots that luaScript.run fills, the keys and the common ARGV, then argv.
func (r *lockRef) call(argv ...any) []any {
	args := make([]any, 3, 3+len(r.args)+len(argv))
	args[2] = len(r.keys)
	args = append(args, r.args...)
	return append(args, argv...)
}

// countArgs are a capacity and a group limit as script arguments.
type countArgs struct {
	capacity, limit int
	args            [2]any
}

// countArgs returns capacity and limit as script arguments: "" for no
// capacity (a mutex's), else numbers. Every process sends the same ones
// for a lock, so the last ones sent are kept boxed: boxing a number of 256
// or more allocates, and would at every call.
func (r *lockRef) countArgs(capacity, limit int) (any, any) {
	if c := r.counts.Load(); c != nil && c.capacity == capacity && c.limit == limit {
		return c.args[0], c.args[1]
	}
	c := &countArgs{capacity: capacity, limit: limit, args: [2]any{noArg, int64(limit)}}
	if capacity > 0 {
		c.args[0] = int64(capacity)
	}
	r.counts.Store(c)
	return c.args[0], c.args[1]
}

// markBusy skips the fast path on the lock for d.
func (r *lockRef) markBusy(d time.Duration) {
	r.busyUntil.Store(time.Now().Add(d).UnixNano())
}

// refCacheSize bounds the lockRefs a Locker keeps: a process that touches
// millions of names recomputes some, and keeps no more than this.
const refCacheSize = 4096

// refKey names a lock among a Locker's: its kind and name.
type refKey struct {
	kind *kind
	name string
}

// A refCache makes and keeps the lockRefs of one Locker.
type refCache struct {
	prefix, locker string
	sharded        bool
	keepMs, scanMs any // keepTTL and the heartbeat in ms, boxed
	recordMs       any // the TTL of a fast-path grant's record
	leaseMs        any // the lease TTL, which a withdrawal mark lives at least

	mu   sync.Mutex
	refs map[refKey]*lockRef
}

func newRefCache(cfg *config, locker string, sharded bool) *refCache {
	return &refCache{
		prefix:   cfg.prefix,
		locker:   locker,
		sharded:  sharded,
		keepMs:   cfg.keepTTL().Milliseconds(),
		scanMs:   cfg.heartbeat().Milliseconds(),
		recordMs: cfg.recordTTL().Milliseconds(),
		leaseMs:  cfg.leaseTTL.Milliseconds(),
		refs:     map[refKey]*lockRef{},
	}
}

// get returns the lockRef of the lock of kind k called name.
func (c *refCache) get(k *kind, name string) *lockRef {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.refs[refKey{k, name}]; r != nil {
		return r
	}
	if len(c.refs) >= refCacheSize {
		clear(c.refs)
	}
	r := &lockRef{name: name, kind: k, keys: lockKeys(c.prefix, k, name)}
	r.sessions = sessionPrefix(c.prefix, name, c.sharded)
	notifyCmd, notifyPrefix := "PUBLISH", keyBase(c.prefix)+"notify:"
	if c.sharded {
		// PUBLISH would be broadcast to every node of a cluster: each lock
		// has its own channels there, in its slot (notify.go).
		notifyCmd, notifyPrefix, r.scope = "SPUBLISH", tagBase(c.prefix, name)+k.space+"notify:", name
	}
	r.channel = notifyPrefix + c.locker
	r.args = make([]any, 0, len(r.keys)+5)
	for _, key := range r.keys {
		r.args = append(r.args, key)
	}
	r.args = append(r.args, r.sessions, notifyCmd, notifyPrefix, c.keepMs, c.scanMs)
	c.refs[refKey{k, name}] = r
	return r
}
