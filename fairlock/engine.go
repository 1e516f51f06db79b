package fairlock

import (
	"strings"
	"time"
)

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
	ref     *lockRef
	shared  bool   // a read-write lock's reader
	permits int    // as events report them: n for a semaphore, else 1
	suffix  string // what the token carries after its number: "#" and the permits Redis counts, if more than one
	// capacity is the lock's capacity, which a counted store checks and
	// sets (a semaphore's, the read-write lock's MaxCapacity); 0 for none
	// to send (a mutex). limit is its group limit, 0 for none.
	capacity, limit int
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
	return Event{Kind: kind, Name: w.ref.name, Lock: w.ref.kind.lock, Shared: w.req.shared, Permits: w.req.permits, Group: w.group, Weight: groupWeight(w.group, w.weight), Priority: tokenPriority(w.token), Token: w.token, Multi: multiOf(w.token)}
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

// multiOf is the multi-request a token is a part of (Holder.Multi): its
// Locker's id and its multiTag, "" for a single request's token.
func multiOf(token string) string {
	i := strings.IndexByte(token, '&')
	if i < 0 {
		return ""
	}
	locker, tag := token[:i], token[i:]
	if j := strings.IndexAny(locker, ".:"); j >= 0 {
		locker = locker[:j]
	}
	if j := strings.IndexAny(tag, "!#"); j >= 0 {
		tag = tag[:j]
	}
	return locker + tag
}

// groupWeight is Event.Weight: a request's group weight, 0 without a group.
func groupWeight(group string, weight int) int {
	if group == "" {
		return 0
	}
	return weight
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
