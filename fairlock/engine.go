package fairlock

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// books are what the Locker knows of its parties, under one mutex that is
// never held across a network call. The locks of a Locker, taken in this
// order and never the other way: books.mu, then a Lease's mu; the
// notifier's mu and the refCache's, never with another.
type books struct {
	mu       sync.Mutex
	closed   bool
	seq      uint64                 // numbers tokens and sessions
	beats    uint64                 // heartbeats so far: which waiters a heartbeat asks about
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
	// askAll has the next heartbeat ask about every waiter: one was found
	// to have lost its place, and the others may have too.
	askAll bool
}

// local returns this Locker's record of a lock, putting it on the books:
// the lockRef keeps it between uses, so that an uncontended acquire makes
// none. books.mu is held.
func (b *books) local(ref *lockRef, capacity, limit any) *localLock {
	key := refKey{ref.kind, ref.name}
	ll := b.locks[key]
	if ll == nil {
		ll = &ref.local
		if ll.ref == nil {
			*ll = localLock{ref: ref, capacity: noArg, limit: noneArg}
		}
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

// kickHeartbeat asks for a heartbeat now, after notifications may have been
// lost.
func (l *Locker) kickHeartbeat() { signal(l.kick) }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// A request is what one Acquire call asks for.
type request struct {
	ref      *lockRef
	shared   bool   // a read-write lock's reader
	permits  int    // as events report them: n for a semaphore, else 1
	suffix   string // what the token carries after its number: "#" and the permits Redis counts, if more than one
	capacity any    // a semaphore's capacity as a script argument, noArg for a mutex
	limit    any    // its group limit, noneArg for none
}

// A waiter is one token of an Acquire call: queued in Redis, or about to
// be. A call that loses its place queues again under a new token.
type waiter struct {
	ref      *lockRef
	req      request
	session  *session
	token    string
	tokenArg any    // token, boxed once for the commands that carry it
	seq      uint64 // its token's number: which heartbeats ask about it
	group    string
	weight   int       // its group's weight, 1 without WithGroupWeight
	meta     string    // its Acquire's WithMetadata, "" if none
	start    time.Time // when its Acquire call began, for Event.Wait
	// sent is when the request that queued it was sent: its grant's record
	// lives at least until sent plus the record TTL. books.mu guards it.
	sent time.Time
	// queued is set once EventEnqueued reported it, so that the event that
	// reports it leaving says so (Event.Queued). Only its Acquire touches it.
	queued bool
	// position is its place as last reported (books.mu), and onPosition
	// hears of changes (OnPosition).
	position   int
	onPosition func(position int)

	// news brings its fence once granted, or 0 when it lost its place; it
	// is made, and the waiter put where messages find it, only when it
	// queues (listen): the fast path needs neither.
	news chan int64
}

// event starts an Event about w.
func (w *waiter) event(kind EventKind) Event {
	return Event{Kind: kind, Name: w.ref.name, Lock: w.ref.kind.lock, Shared: w.req.shared, Permits: w.req.permits, Group: w.group, Weight: groupWeight(w.group, w.weight), Priority: tokenPriority(w.token), Token: w.token}
}

func (b *books) forget(w *waiter) {
	delete(b.waiters, w.token)
	delete(w.session.waiters, w)
	if ll := b.lockOf(w.ref); ll != nil {
		delete(ll.waiters, w)
		b.dropIfIdle(ll)
	}
}

// A Lease is a held lock, or a semaphore's or read-write lock's grant. It
// ends when released, or when lost: its session or record expired, it was
// ended by force, or Redis forgot it. Done and Err tell which.
//
// A holder learns of a loss from its own clock: its lease ends locally a
// margin (a tenth of the lease TTL) before Redis could let anyone else in,
// counted from the last renewal Redis answered. A process that is paused
// or starved for longer than that margin (GC, swap, SIGSTOP, a loaded
// machine) can still act after its lock passed on; only Fence, passed to
// the storage the lock guards, protects the resource then.
type Lease struct {
	locker   *Locker
	ref      *lockRef
	session  *session
	shared   bool // a read-write lock's reader
	permits  int
	group    string
	weight   int // its group's weight when granted
	token    string
	tokenArg any // token, boxed once (its waiter's)
	fence    int64
	hasMeta  bool // Redis has metadata under token to drop or keep; never changed
	queued   bool // it waited in the queue, so others likely wait behind it (Lease.release)
	// marked is set while Redis may mark the grant "u", not taken up yet
	// (session.go): it then lives by its session's waiters' key too.
	marked atomic.Bool

	mu          sync.Mutex
	done        chan struct{} // made by the first Done
	err         error         // nil while held
	recordUntil time.Time     // before it, Redis surely still has the record
	expiry      *time.Timer   // ends the lease at recordUntil, whatever the heartbeat is doing
	renewAt     time.Time     // when the heartbeat renews the record
	releasing   bool          // Release was sent: a lease found gone is no loss
	granted     time.Time     // when Acquire handed it out, for Event.Held; zero before
}

// event starts an Event about s.
func (s *Lease) event(kind EventKind) Event {
	return Event{Kind: kind, Name: s.ref.name, Lock: s.ref.kind.lock, Shared: s.shared, Permits: s.permits, Group: s.group, Weight: groupWeight(s.group, s.weight), Priority: tokenPriority(s.token), Token: s.token}
}

// tokenPriority is the priority a token asks for: the digit after its "!"
// (Locker.lane), 0 without one.
func tokenPriority(token string) int {
	if i := strings.LastIndexByte(token, '!'); i >= 0 && i+1 < len(token) {
		if p := int(token[i+1] - '0'); p >= 0 && p <= MaxPriority {
			return p
		}
	}
	return 0
}

// groupWeight is Event.Weight: a request's group weight, 0 without a group.
func groupWeight(group string, weight int) int {
	if group == "" {
		return 0
	}
	return weight
}

// A withdrawal is a token that Redis may still hold, queued or granted,
// after its call failed: a reply lost after Redis ran it, a Redis that went
// away. Its session keeps it alive for as long as the Locker runs, so the
// Locker withdraws it (cancel.lua, which also releases a grant) at every
// heartbeat until Redis answers, or until the session itself is lost and
// takes the token with it. So a caller told that its call failed holds
// nothing within one heartbeat of Redis answering again.
type withdrawal struct {
	ref     *lockRef
	session *session
	hasMeta bool
	forGood bool // the request that brought the token may still be on its way
}

// deliver hands a grant to a waiter once; repeats (message and heartbeat
// both) are dropped.
func deliver(w *waiter, fence int64) {
	select {
	case w.news <- fence:
	default:
	}
}

// evict tells w that it lost its place. A grant and an eviction that race
// keep the first: a waiter told it lost its place withdraws, which gives
// back a grant it missed.
func evict(w *waiter) { deliver(w, 0) }

// forget takes w off this Locker's books; its session still counts it.
func (l *Locker) forget(w *waiter) {
	b := &l.books
	b.mu.Lock()
	defer b.mu.Unlock()
	b.forget(w)
}

// drop forgets a waiter that Redis surely does not hold.
func (l *Locker) drop(w *waiter) {
	b := &l.books
	b.mu.Lock()
	defer b.mu.Unlock()
	b.forget(w)
	w.session.left()
}
