package fairlock

import "sync"

// A writeCount is what a Locker knows of its session's count of writes in
// Redis (the hash's field "", lib/tokens.lua's countWrite): the least count
// the next renewal can find in a Redis that lost none of them. A renewal
// that finds less has seen a rollback (docs/design.md, rule 8).
//
// Counting only the calls Redis answered is not enough. Redis can count
// more than its Locker heard of: a call sent twice (a retry after a lost
// reply), a renewal whose answer was lost. That surplus would last as long
// as the session, and hide a later rollback that lost no more writes than
// it (the state machine found a released lease's ghost kept alive that
// way). So the count is also taken from Redis's own answer: what the
// last renewal found, and every counted call sent after that answer came
// ran after that renewal. A surplus then hides a rollback only while it
// is younger than a heartbeat.
//
// It has its own mutex: calls are counted where they are answered, on
// callers' goroutines and the heartbeat's, without books.mu.
type writeCount struct {
	mu sync.Mutex
	// answered counts the calls Redis answered, renewals included.
	answered int64
	// renewals counts the renewals' answers; found is the count the last
	// one found, and since counts the calls sent after it came that Redis
	// answered.
	renewals, found, since int64
}

// A countTicket is taken just before a counted call is sent.
type countTicket struct {
	// open is whether the session was open: a withdrawal sent before may
	// not count in Redis (withdraw.go's cancelToken).
	open     bool
	renewals int64
}

// ticket is the ticket of a call about to be sent in a session that is
// open or not.
func (c *writeCount) ticket(open bool) countTicket {
	c.mu.Lock()
	defer c.mu.Unlock()
	return countTicket{open: open, renewals: c.renewals}
}

// add counts a call that Redis answered, sent with t. One sent before the
// session opened is not counted: it may have reached Redis first and
// counted itself in the mark's key, which the opening adds in only within
// the lease TTL (the request that would have opened the session may never
// have been sent), so the Locker cannot know that it counts. Counted, it
// would make the first renewal take the shortfall for a rollback
// (TestEarlyWithdrawalKeepsTheCount).
func (c *writeCount) add(t countTicket) {
	if !t.open {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answered++
	if t.renewals == c.renewals {
		c.since++
	}
}

// want is the least count the next renewal, sent now, finds in a Redis
// that lost none of the session's writes: it opened at 1, and the renewal
// adds one to every call answered before it; and it adds one to what the
// last renewal found, and to every call sent after that was answered.
func (c *writeCount) want() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	want := c.answered + 2
	if c.renewals > 0 {
		want = max(want, c.found+c.since+1)
	}
	return want
}

// renewed records a renewal's answer: the count it found.
func (c *writeCount) renewed(found int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answered++
	c.renewals++
	c.found, c.since = found, 0
}
