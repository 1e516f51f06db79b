package fairlock

import (
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/fairlock/fairlock/scripts"
)

// books are what a Locker knows of its parties: its sessions, waiters,
// leases on the books, and withdrawals still to make. They are the only
// owner of that state, and the only code that takes their mutex: they
// hold no Redis client, send nothing and report no event, and their
// methods return what the caller is to do (a plan to send, parties to
// end), which the caller does with no lock held. So the mutex is never
// held across a network call, by construction.
//
// The locks of a Locker, taken in this order and never the other way:
// books.mu, then a Lease's mu (Lease.needsRenewal, under books.mu). The
// notifier's mu, the refCache's and a lockRef's are each taken alone.
// preflight.mu is taken alone too, and held across the INFO calls of a
// Redis's first check, so that the calls that wait for it do not repeat
// them.
type books struct {
	cfg *config
	// expired is called, on a timer's goroutine, when the local deadline
	// of a session's holders' key (lease) or waiters' key passed.
	expired func(s *session, lease bool)

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

func newBooks(cfg *config, expired func(s *session, lease bool)) *books {
	return &books{cfg: cfg, expired: expired, current: map[string]*session{}, sessions: map[*session]struct{}{},
		waiters: map[string]*waiter{}, locks: map[refKey]*localLock{}, pending: map[string]*withdrawal{}}
}

// localLock is what this Locker has on one lock.
type localLock struct {
	ref      *lockRef
	waiters  map[*waiter]struct{} // queued in Redis, to check on
	leases   map[*Lease]struct{}  // held, their records to renew
	capacity int                  // as its latest party asked (request.capacity): the heartbeat puts it back if lost
	limit    int                  // its group limit, likewise
	keptAt   time.Time            // when the heartbeat last made its keys live keepTTL more
	// askAll has the next heartbeat ask about every waiter: one was found
	// to have lost its place, and the others may have too.
	askAll bool
}

// ---- the Locker ----

// enter counts a call in, unless the Locker is closed.
func (b *books) enter(calls *sync.WaitGroup) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	calls.Add(1)
	return true
}

// close marks the Locker closed; false if it was already.
func (b *books) close() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.closed = true
	return true
}

// heldLeases lists every lease on the books.
func (b *books) heldLeases() []*Lease {
	b.mu.Lock()
	defer b.mu.Unlock()
	var leases []*Lease
	for _, ll := range b.locks {
		for lease := range ll.leases {
			leases = append(leases, lease)
		}
	}
	return leases
}

// stopSessions stops every session's timers, and returns the keys of those
// that opened, to delete.
func (b *books) stopSessions() []any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var keys []any
	for s := range b.sessions {
		if s.opened {
			keys = append(keys, s.keys[0], s.keys[1])
		}
		stopTimer(s.leaseTimer)
		stopTimer(s.waitTimer)
	}
	return keys
}

// inUse tells whether this Locker has parties on locks called name.
func (b *books) inUse(name string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for key := range b.locks {
		if key.name == name {
			return true
		}
	}
	return false
}

// has tells whether this Locker waits for or holds the lock ref.
func (b *books) has(ref *lockRef) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lockOf(ref) != nil
}

// ---- locks ----

// local returns this Locker's record of the lock req asks for, putting it
// on the books, with req's capacity and limit: the lockRef keeps it
// between uses, so that an uncontended acquire makes none. b.mu is held.
func (b *books) local(req request) *localLock {
	ref := req.ref
	key := refKey{ref.kind, ref.name}
	ll := b.locks[key]
	if ll == nil {
		ll = &ref.local
		if ll.ref == nil {
			*ll = localLock{ref: ref}
		}
		b.locks[key] = ll
	}
	ll.capacity, ll.limit = req.capacity, req.limit
	return ll
}

// dropIfIdle forgets a lock with no waiter and no lease here. b.mu is held.
func (b *books) dropIfIdle(ll *localLock) {
	if ll != nil && len(ll.leases) == 0 && len(ll.waiters) == 0 {
		delete(b.locks, refKey{ll.ref.kind, ll.ref.name})
	}
}

// lockOf is the record of the lock ref, or nil. b.mu is held.
func (b *books) lockOf(ref *lockRef) *localLock { return b.locks[refKey{ref.kind, ref.name}] }

// ---- sessions ----

// sessionFor returns the session that a new party on ref joins, counted
// in. b.mu is held.
func (b *books) sessionFor(ref *lockRef, locker string) *session {
	s := b.current[ref.scope]
	if s == nil {
		b.seq++
		id := locker + "." + strconv.FormatUint(b.seq, 36)
		key := ref.sessions + id
		s = &session{id: id, scope: ref.scope, keys: [2]any{key, key + scripts.WaitersKeySuffix},
			leases: map[*Lease]struct{}{}, waiters: map[*waiter]struct{}{}, marks: map[string]*Lease{}}
		b.current[ref.scope] = s
		b.sessions[s] = struct{}{}
	}
	s.parties++
	return s
}

// openArgs are what a call that opens s sends (acquire.lua's last ARGV):
// the TTLs of its keys and of its grants' records, in ms. nil once s is
// open. b.mu is held.
func (b *books) openArgs(s *session) []any {
	if s.opened {
		return nil
	}
	return []any{b.cfg.leaseTTL.Milliseconds(), b.cfg.waitTTL().Milliseconds(), b.cfg.recordTTL().Milliseconds()}
}

// stillToOpen is open, or nil if a call opened s meanwhile.
func (b *books) stillToOpen(s *session, open []any) []any {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.opened {
		return nil
	}
	return open
}

// isOpen tells whether a call that opened s was answered.
func (b *books) isOpen(s *session) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return s.opened
}

// confirm records that Redis answered a call that renewed (or opened) the
// keys of s it names, sent at sent, and moves their deadlines.
func (b *books) confirm(s *session, sent time.Time, holders, waiters bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, live := b.sessions[s]; !live {
		return
	}
	s.opened = true
	if holders {
		s.leaseUntil = sent.Add(b.cfg.leaseTTL - b.cfg.margin())
		s.leaseTimer = resetTimer(s.leaseTimer, s.leaseUntil, func() { b.expired(s, true) })
	}
	if waiters && !s.waitLost {
		s.waitUntil = sent.Add(b.cfg.waitTTL() - b.cfg.waitMargin())
		s.waitTimer = resetTimer(s.waitTimer, s.waitUntil, func() { b.expired(s, false) })
	}
}

// passed tells whether the deadline of s's holders' key (lease) or
// waiters' key passed: a timer may fire after a renewal moved it.
func (b *books) passed(s *session, lease bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if lease {
		return time.Now().After(s.leaseUntil)
	}
	return time.Now().After(s.waitUntil)
}

// overdue tells which deadline of s passed at now while its timer has not
// run yet: the holders' key's (every party), or the waiters' key's (those
// that live by it, for a marked grant).
func (b *books) overdue(s *session, marked bool, now time.Time) (lease, wait bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, live := b.sessions[s]
	lease = live && !s.leaseUntil.IsZero() && now.After(s.leaseUntil)
	wait = live && marked && !s.waitLost && !s.waitUntil.IsZero() && now.After(s.waitUntil)
	return lease, wait
}

// retire takes s out of use for new parties, and returns its parties to
// end: every lease if all is set, else those that live by its waiters' key.
func (b *books) retire(s *session, all bool) ([]*Lease, []*waiter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.current[s.scope] == s {
		delete(b.current, s.scope)
	}
	s.waitLost = true
	stopTimer(s.waitTimer)
	// No renewal takes a grant up any more: those it marked die with the
	// waiters' key, and their withdrawals drop the marks.
	clear(s.marks)
	waiters := make([]*waiter, 0, len(s.waiters))
	for w := range s.waiters {
		waiters = append(waiters, w)
	}
	var leases []*Lease
	for lease := range s.leases {
		if all || lease.marked.Load() {
			leases = append(leases, lease)
		}
	}
	if !all {
		return leases, waiters
	}
	delete(b.sessions, s)
	stopTimer(s.leaseTimer)
	for token, wd := range b.pending {
		if wd.session == s {
			delete(b.pending, token)
			s.left()
		}
	}
	return leases, waiters
}

// renewals lists the sessions to renew, and forgets those idle for a
// heartbeat: their keys are to be deleted, and would expire anyway.
func (b *books) renewals() (renew []*renewal, idle []*session) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.sessions {
		switch {
		case s.parties == 0 && len(s.marks) == 0 && time.Since(s.idle) > b.cfg.heartbeat():
			delete(b.sessions, s)
			if b.current[s.scope] == s {
				delete(b.current, s.scope)
			}
			stopTimer(s.leaseTimer)
			stopTimer(s.waitTimer)
			if s.opened {
				idle = append(idle, s)
			}
		case s.opened:
			r := &renewal{s: s, waiting: !s.waitLost, want: s.count.want()}
			for token := range s.marks {
				if len(r.marks) == scripts.Batch {
					break
				}
				r.marks = append(r.marks, token)
			}
			renew = append(renew, r)
		}
	}
	return renew, idle
}

// tookUp records that Redis dropped the marks of tokens: their grants now
// live by the holders' key alone.
func (b *books) tookUp(s *session, tokens []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, token := range tokens {
		if lease := s.marks[token]; lease != nil {
			lease.marked.Store(false)
		}
		delete(s.marks, token)
	}
}

// refsOf lists the locks the parties of s use.
func (b *books) refsOf(s *session) map[*lockRef]bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	refs := map[*lockRef]bool{}
	for lease := range s.leases {
		refs[lease.ref] = true
	}
	for w := range s.waiters {
		refs[w.ref] = true
	}
	return refs
}

// ---- waiters ----

// multiTag is a fresh mark for the tokens of one multi-request's parts
// (MultiMutex), which Holder.Multi reads back: "&" and a number that no
// other token of this Locker carries.
func (b *books) multiTag() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	return "&" + strconv.FormatUint(b.seq, 36)
}

// newWaiter makes a waiter of req under a fresh token of its session, the
// token carrying lane (Locker.lane); listen puts it on the books when it
// is to queue. open is what its first request sends to open the session,
// nil if it is open.
func (b *books) newWaiter(req request, cfg *acquireConfig, lane, locker string, start time.Time) (w *waiter, open []any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.sessionFor(req.ref, locker)
	b.seq++
	w = &waiter{
		ref:        req.ref,
		req:        req,
		session:    s,
		token:      s.id + ":" + strconv.FormatUint(b.seq, 36) + cfg.multi + lane + req.suffix,
		seq:        b.seq,
		group:      cfg.group,
		weight:     max(cfg.weight, 1),
		meta:       cfg.metadata,
		start:      start,
		onPosition: cfg.onPosition,
	}
	w.tokenArg = w.token
	return w, b.openArgs(s)
}

// listen puts w where grant messages, the heartbeat and its session's end
// find it, before the request that queues it is sent.
func (b *books) listen(w *waiter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.news == nil {
		w.news = make(chan int64, 1)
		b.waiters[w.token] = w
		w.session.waiters[w] = struct{}{}
	}
}

// sentAt records that w's request, or the call that confirmed its grant,
// was sent at t: its grant's record lives at least until then plus the
// record TTL. It returns t.
func (b *books) sentAt(w *waiter, t time.Time) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	w.sent = t
	return t
}

// recordEnd is when w's grant's record ends in Redis at the earliest.
func (b *books) recordEnd(w *waiter) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return w.sent.Add(b.cfg.recordTTL())
}

// queued records w's place and puts it under the heartbeat's care.
func (b *books) queued(w *waiter, position int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w.position = position
	ll := b.local(w.req)
	if ll.waiters == nil {
		ll.waiters = map[*waiter]struct{}{}
	}
	ll.waiters[w] = struct{}{}
}

// forget takes w off the books; its session still counts it.
func (b *books) forget(w *waiter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.forgetLocked(w)
}

// forgetLocked is forget with b.mu held.
func (b *books) forgetLocked(w *waiter) {
	delete(b.waiters, w.token)
	delete(w.session.waiters, w)
	if ll := b.lockOf(w.ref); ll != nil {
		delete(ll.waiters, w)
		b.dropIfIdle(ll)
	}
}

// drop forgets a waiter that Redis surely does not hold.
func (b *books) drop(w *waiter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.forgetLocked(w)
	w.session.left()
}

// withdrawn forgets w, whose request Redis withdrew before it arrived. If
// that request was to open w's session (open), no party joins the session
// any more: the request may still come and open it, after a loss of
// Redis's data took the withdrawal's mark with it; the session then dies
// within its TTL, as nobody renews it.
func (b *books) withdrawn(w *waiter, open []any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.forgetLocked(w)
	w.session.left()
	if open != nil && b.current[w.session.scope] == w.session {
		delete(b.current, w.session.scope)
	}
}

// deliverGrants routes a grant message to the waiters it names.
func (b *books) deliverGrants(payload string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	parseGrants(payload, func(token string, fence int64) {
		if w := b.waiters[token]; w != nil {
			deliver(w, fence)
		}
	})
}

// grantDeadline says whether w's session is live, and when a grant made
// on w's behalf ends here unless taken up: the earliest of the session's
// deadlines for a marked grant and its record's.
func (b *books) grantDeadline(w *waiter) (live bool, until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, live = b.sessions[w.session]
	until = w.session.deadline(true)
	if record := w.sent.Add(b.cfg.recordTTL() - b.cfg.margin()); record.Before(until) {
		until = record
	}
	return live, until
}

// ---- leases ----

// holdLease puts lease, w's grant, on the books in place of w, unless the
// Locker closed or w's session ended meanwhile; marked says whether Redis
// may still mark the grant as not taken up.
func (b *books) holdLease(lease *Lease, w *waiter, marked bool) (closed, live bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	closed = b.closed
	_, live = b.sessions[w.session]
	live = live && time.Now().Before(w.session.deadline(marked))
	b.forgetLocked(w)
	if marked {
		// Its mark goes at the next renewal: taken up if it is held here,
		// or cleared.
		w.session.marks[lease.token] = nil
	}
	if !closed && live {
		ll := b.local(w.req)
		if ll.leases == nil {
			ll.leases = map[*Lease]struct{}{}
		}
		ll.leases[lease] = struct{}{}
		w.session.leases[lease] = struct{}{}
		if marked {
			w.session.marks[lease.token] = lease
		}
	}
	return closed, live
}

// leaseEnded takes lease off the books. If withdraw is set and its session
// lives, Redis may still hold it: it goes to the withdrawals to make.
func (b *books) leaseEnded(lease *Lease, withdraw bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ll := b.lockOf(lease.ref); ll != nil {
		delete(ll.leases, lease)
		b.dropIfIdle(ll)
	}
	delete(lease.session.leases, lease)
	if lease.marked.Load() && !lease.session.waitLost {
		lease.session.marks[lease.token] = nil // cleared at the next renewal
	}
	if _, live := b.sessions[lease.session]; withdraw && live {
		b.pending[lease.token] = &withdrawal{ref: lease.ref, session: lease.session, hasMeta: lease.hasMeta}
	} else {
		lease.session.left() // a session Redis lost takes the token with it
	}
}

// unmark records that Redis no longer marks lease's grant as not taken up.
func (b *books) unmark(lease *Lease) {
	b.mu.Lock()
	defer b.mu.Unlock()
	lease.marked.Store(false)
	delete(lease.session.marks, lease.token)
}

// ---- withdrawals ----

// afterWithdrawal counts wd done, or, if it failed and its session lives,
// keeps it for the heartbeat to retry.
func (b *books) afterWithdrawal(token string, wd *withdrawal, failed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, live := b.sessions[wd.session]; failed && live {
		b.pending[token] = wd
		return
	}
	b.withdrew(wd)
}

// pendingWithdrawals lists the withdrawals to retry.
func (b *books) pendingWithdrawals() map[string]*withdrawal {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.pending)
}

// retried counts a withdrawal the heartbeat retried done, once.
func (b *books) retried(token string, wd *withdrawal) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending[token] == wd {
		delete(b.pending, token)
		b.withdrew(wd)
	}
}

// withdrew counts a withdrawal done. A session that withdrew many tokens
// for good takes no new parties: each left a mark in Redis that lives as
// long as the session. b.mu is held.
func (b *books) withdrew(wd *withdrawal) {
	s := wd.session
	s.left()
	if wd.forGood {
		if s.withdrawn++; s.withdrawn >= maxWithdrawn && b.current[s.scope] == s {
			delete(b.current, s.scope)
		}
	}
}

// ---- the heartbeat ----

// heartbeatPlan lists the calls of one heartbeat.
func (b *books) heartbeatPlan(sharded bool) *heartbeatPlan {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.beats++
	now := time.Now()
	p := &heartbeatPlan{}
	var mget *leaseCheck
	marked := map[*session]bool{}
	for _, ll := range b.locks {
		var zmscore *leaseCheck
		for lease := range ll.leases {
			if lease.needsRenewal(now) {
				p.renewals = append(p.renewals, &recordRenewal{lease: lease})
			}
			switch {
			case ll.ref.kind.holderSet:
				if zmscore == nil {
					zmscore = &leaseCheck{args: []any{"zmscore", ll.ref.args[0]}}
					p.checks = append(p.checks, zmscore)
				}
				zmscore.leases, zmscore.args = append(zmscore.leases, lease), append(zmscore.args, lease.token)
			case sharded:
				p.checks = append(p.checks, &leaseCheck{leases: []*Lease{lease}, args: []any{"get", ll.ref.args[0]}})
			default:
				if mget == nil || len(mget.leases) == scripts.Batch {
					mget = &leaseCheck{args: []any{"mget"}}
					p.checks = append(p.checks, mget)
				}
				mget.leases, mget.args = append(mget.leases, lease), append(mget.args, ll.ref.args[0])
			}
		}
		if len(ll.waiters) > 0 {
			b.planWaiters(p, ll, now, marked)
		}
	}
	for s := range marked {
		p.marks = append(p.marks, &markRead{session: s})
	}
	return p
}

// planWaiters adds to p what asks about the waiters of ll; marked gathers
// the sessions whose marks are to be read. b.mu is held.
func (b *books) planWaiters(p *heartbeatPlan, ll *localLock, now time.Time, marked map[*session]bool) {
	keep := now.Sub(ll.keptAt) > b.cfg.keepTTL()/3
	if keep {
		ll.keptAt = now
	}
	every := uint64(1)
	for !ll.askAll && every*scripts.Batch < uint64(len(ll.waiters)) {
		every *= 2
	}
	ll.askAll = false
	newest := map[waiterLine]*waiter{}
	for w := range ll.waiters {
		line := waiterLine{tokenPriority(w.token), w.group}
		if n := newest[line]; n == nil || w.seq > n.seq {
			newest[line] = w
		}
	}
	var c *heartbeatCall
	var q *queueCheck
	for w := range ll.waiters {
		switch {
		case w.onPosition != nil || newest[waiterLine{tokenPriority(w.token), w.group}] == w:
			if c == nil || len(c.waiters) == scripts.Batch {
				c = &heartbeatCall{ref: ll.ref, capacity: ll.capacity, limit: ll.limit, keep: keep}
				p.calls = append(p.calls, c)
			}
			c.waiters = append(c.waiters, w)
			c.positions = c.positions || w.onPosition != nil
		case w.seq%every == b.beats%every:
			if q == nil || len(q.waiters) == scripts.Batch {
				q = &queueCheck{ref: ll.ref}
				p.queued = append(p.queued, q)
			}
			q.waiters = append(q.waiters, w)
		default:
			marked[w.session] = true
		}
	}
}

// A move is a waiter's new place, to report.
type move struct {
	w        *waiter
	position int
}

// heartbeatStates hands each waiter of c its state from heartbeat.lua:
// a grant whose message was lost, a lost place, or a new place, which it
// returns to report. kick says that the next heartbeat, now, should ask
// about every waiter of the lock: one lost its place.
func (b *books) heartbeatStates(c *heartbeatCall, states []int64) (moved []move, kick bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, w := range c.waiters {
		if b.waiters[w.token] != w {
			continue // granted or gone meanwhile
		}
		switch status := states[i]; {
		case status < 0:
			if p := int(-status); w.onPosition != nil && p != w.position {
				w.position = p
				moved = append(moved, move{w, p})
			}
		case status == 0:
			evict(w)
			if ll := b.lockOf(c.ref); ll != nil && len(ll.waiters) > scripts.Batch && !ll.askAll {
				ll.askAll = true
				kick = true
			}
		default:
			deliver(w, status)
		}
	}
	return moved, kick
}

// goneFromQueue adds to gone the waiters of q, still waiting here, that
// the order set no longer has (scores nil).
func (b *books) goneFromQueue(q *queueCheck, scores []any, gone map[*waiter]bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, w := range q.waiters {
		if scores[i] == nil && b.waiters[w.token] == w {
			gone[w] = true
		}
	}
}

// markedGranted adds to gone the waiters, still waiting here, whose grant
// their session's marks show.
func (b *books) markedGranted(marks map[string]string, gone map[*waiter]bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for token, mark := range marks {
		if w := b.waiters[token]; w != nil && mark == "u" {
			gone[w] = true
		}
	}
}

// askPlan is the heartbeat.lua calls that ask about the waiters gone.
func (b *books) askPlan(gone map[*waiter]bool) *heartbeatPlan {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := &heartbeatPlan{}
	calls := map[*lockRef]*heartbeatCall{}
	for w := range gone {
		c := calls[w.ref]
		if c == nil || len(c.waiters) == scripts.Batch {
			ll := b.lockOf(w.ref)
			if ll == nil {
				continue
			}
			c = &heartbeatCall{ref: w.ref, capacity: ll.capacity, limit: ll.limit}
			calls[w.ref] = c
			p.calls = append(p.calls, c)
		}
		c.waiters = append(c.waiters, w)
	}
	return p
}

// ---- what parties are, apart from the books ----

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
