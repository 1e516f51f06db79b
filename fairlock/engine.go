package fairlock

import (
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Locker grants fair locks on one Redis (or Redis Cluster) to the
// goroutines of a process. It is safe for concurrent use; one per process
// is the normal use. All its waiters and leases share one session, one
// pub/sub connection (one per shard on Cluster) and one heartbeat timer.
type Locker struct {
	client   redis.UniversalClient
	cfg      config
	id       string
	sharded  bool // on Redis Cluster: sessions and channels per lock name
	refs     *refCache
	notifier *notifier
	checks   preflight
	books    books
	calls    sync.WaitGroup // Acquire and TryAcquire calls under way
	closing  chan struct{}  // closed by Close: waiters give up
	stopped  chan struct{}  // closed by Close when no call is left: background goroutines stop
	kick     chan struct{}  // asks for a heartbeat now
	bg       sync.WaitGroup
}

// books are what the Locker knows of its parties, under one mutex that is
// never held across a network call.
type books struct {
	mu       sync.Mutex
	closed   bool
	seq      uint64                 // numbers tokens and sessions
	current  map[string]*session    // the session new parties join, by scope
	sessions map[*session]struct{}  // every session to renew
	waiters  map[string]*waiter     // by token: where grant messages go
	locks    map[refKey]*localLock  // what the heartbeat covers
	pending  map[string]*withdrawal // by token: withdrawals to retry
}

// localLock is what this Locker has on one lock.
type localLock struct {
	ref      *lockRef
	waiters  map[*waiter]struct{} // queued in Redis, to check on
	leases   map[*Lease]struct{}  // held, their records to renew
	capacity any                  // a semaphore's, as its latest party asked: the heartbeat puts it back if lost
	limit    any                  // its group limit, likewise
	keptAt   time.Time            // when the heartbeat last made its keys live keepTTL more
}

// local returns this Locker's record of a lock, creating it. books.mu is
// held.
func (b *books) local(ref *lockRef, capacity, limit any) *localLock {
	key := refKey{ref.kind, ref.name}
	ll := b.locks[key]
	if ll == nil {
		ll = &localLock{ref: ref, capacity: noArg, limit: noneArg}
		b.locks[key] = ll
	}
	if capacity != nil {
		ll.capacity, ll.limit = capacity, limit
	}
	return ll
}

// dropIfIdle forgets a lock with no waiter and no lease here. books.mu is
// held.
func (b *books) dropIfIdle(ll *localLock) {
	if ll != nil && len(ll.leases) == 0 && len(ll.waiters) == 0 {
		delete(b.locks, refKey{ll.ref.kind, ll.ref.name})
	}
}

// lockOf is the record of the lock ref, or nil. books.mu is held.
func (b *books) lockOf(ref *lockRef) *localLock { return b.locks[refKey{ref.kind, ref.name}] }

func (l *Locker) observe(e Event) { l.cfg.observe(e) }

// kickHeartbeat asks for a heartbeat now, after notifications may have been
// lost.
func (l *Locker) kickHeartbeat() { signal(l.kick) }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
