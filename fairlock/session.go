package fairlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fairlock/fairlock/scripts"
	"github.com/redis/go-redis/v9"
)

// A session is this Locker's liveness in one Redis, or on Redis Cluster in
// one lock name's slot (a script sees only its own slot). Every party of
// the Locker (waiter, lease, withdrawal) lives in one, and its token starts
// with the session's id, so that any script can tell whether the party's
// Locker is alive (scripts/lib/tokens.lua). Two keys say so, renewed every
// heartbeat however many parties there are: the holders' key, a hash with
// the lease TTL, and the waiters' key, with the waiter TTL. So holding
// 10,000 locks costs one renewal, not 10,000.
//
// What keeps each party alive, and so where its local deadline comes from:
//   - a waiter lives by the waiters' key;
//   - a grant made to a waiter on its behalf (by another call's script)
//     lives by the waiters' key too, until the Locker takes it up: its
//     next renewal, or the round trip of an accept that found the grant
//     late, drops the mark "u" the grant left in the holders' key;
//   - a grant taken up, or made in the caller's own call, lives by the
//     holders' key;
//   - every grant lives by its record too (the lock key, or its score in a
//     semaphore's holders), which the heartbeat renews every keepTTL/3;
//   - a token withdrawn for good (its request's fate unknown) is marked
//     "x" in the holders' key, and is dead for as long as the session
//     lives, however late its request comes.
//
// A session that Redis lost, or whose renewal failed for longer than its
// TTL, is never renewed again: its parties are lost, and the Locker starts
// a new session for new parties. So is a session whose writes Redis lost
// while keeping the session (a rollback: a failover to a replica that
// missed them, a restart from an older snapshot): the calls that remove a
// party (releases, withdrawals) and the renewals each add one to a count
// in the session's hash (scripts/lib/tokens.lua's countWrite), the Locker
// counts those Redis answered, and a renewal that finds the count below
// that has seen Redis lose a write. Without that, a release lost in a
// rollback would leave its token holding the lock for as long as its
// session lived. A session left without parties for a heartbeat is
// forgotten too, and its keys deleted.
//
// Its fields are guarded by books.mu, but count.
type session struct {
	id    string
	scope string // "" on one Redis; the lock name on Cluster
	keys  [2]any // holders' and waiters' keys, boxed
	// opened is set once a call that wrote its keys was answered.
	opened bool
	// parties counts its waiters, leases and withdrawals; idle is when it
	// fell to 0.
	parties int
	idle    time.Time
	// leaseUntil and waitUntil are the local deadlines of the holders' and
	// the waiters' keys: a renewal sent at t that Redis answered moves each
	// to t plus its TTL, less a tenth of it. Redis cannot drop the keys
	// before. Each has a timer that ends what lives by it.
	leaseUntil, waitUntil time.Time
	leaseTimer, waitTimer *time.Timer
	waitLost              bool // its waiters' key is gone: no new waiter joins it
	leases                map[*Lease]struct{}
	waiters               map[*waiter]struct{}
	// marks are the tokens of its grants that Redis may still mark "u",
	// with their leases (nil once ended): the next renewal takes them up,
	// or clears the marks of those that ended.
	marks map[string]*Lease
	// withdrawn counts the tokens it marked "x". Past maxWithdrawn, new
	// parties join another session, so that the marks stay few.
	withdrawn int
	// count is what the Locker knows of the calls that count themselves
	// in its hash: releases that freed a lock, withdrawals, renewals.
	count writeCount
}

// errRolledBack is the Err of the EventWarning that reports a session given up
// because Redis lost writes it had answered.
var errRolledBack = errors.New("fairlock: Redis lost writes it had acknowledged (a failover to a replica that missed them, or a restart from an older snapshot): the session is given up, its leases lost, its waiters queued again")

// maxWithdrawn is how many tokens one session withdraws for good before
// the Locker starts another for new parties.
const maxWithdrawn = scripts.Batch

// left counts a party out of s. books.mu is held.
func (s *session) left() {
	s.parties--
	if s.parties == 0 {
		s.idle = time.Now()
	}
}

// deadline is when a grant in s ends locally, by the keys it lives by:
// the holders' key, and the waiters' key too while the grant is marked
// "u". books.mu is held.
func (s *session) deadline(marked bool) time.Time {
	if marked && (s.waitLost || s.waitUntil.Before(s.leaseUntil)) {
		if s.waitLost {
			return time.Time{}
		}
		return s.waitUntil
	}
	return s.leaseUntil
}

// resetTimer makes t, or a new timer if t is nil, call fn at d.
func resetTimer(t *time.Timer, d time.Time, fn func()) *time.Timer {
	if t == nil {
		return time.AfterFunc(time.Until(d), fn)
	}
	t.Reset(time.Until(d))
	return t
}

// sessionExpired ends what lives by a key of s whose local deadline
// passed unrenewed (lease: the holders' key, every party; else the waiters'
// key), and deletes the key: Redis may still have it, renewed by requests
// whose answers never came, and what lives by it is over here. It runs on
// the deadline's timer.
func (l *Locker) sessionExpired(s *session, lease bool) {
	switch {
	case !l.books.passed(s, lease):
	case lease:
		l.loseSession(s)
		l.deleteKeys(s.keys[0], s.keys[1])
	default:
		l.loseWaiters(s)
		l.deleteKeys(s.keys[1])
	}
}

// endIfOverdue ends what lives by a deadline of s that passed at now,
// when its timer has not run yet: every party, or those that live by the
// waiters' key. It sends nothing: the keys are at their end in Redis too.
func (l *Locker) endIfOverdue(s *session, marked bool, now time.Time) {
	switch lease, wait := l.books.overdue(s, marked, now); {
	case lease:
		l.loseSession(s)
	case wait:
		l.loseWaiters(s)
	}
}

// deleteKeys deletes keys of a session this Locker gave up, so that its
// waiters' places and its grants pass on now rather than after their TTL.
// It runs on a timer's goroutine, bounded by the waiter TTL.
func (l *Locker) deleteKeys(keys ...any) {
	ctx, cancel := context.WithTimeout(l.life, l.cfg.waitTTL())
	defer cancel()
	pipeline(ctx, l.client, deletions(ctx, keys...)) //nolint:errcheck // best effort: the keys expire anyway
}

// loseSession ends s: Redis no longer has it, or may not. Its leases are
// lost, its waiters queue again in a new session, and its withdrawals are
// dropped, since Redis forgets their records with it.
func (l *Locker) loseSession(s *session) {
	endParties(l.books.retire(s, true))
}

// loseWaiters ends the waiting half of s: its waiters queue again in a new
// session, and the grants it has not taken up are lost; the other leases
// stay.
func (l *Locker) loseWaiters(s *session) {
	endParties(l.books.retire(s, false))
}

// endParties tells waiters they lost their place, and ends leases as lost.
func endParties(leases []*Lease, waiters []*waiter) {
	for _, w := range waiters {
		evict(w)
	}
	for _, lease := range leases {
		lease.lose()
	}
}

func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

// renewal is one session's renewal: its renew.lua call in the heartbeat's
// pipeline.
type renewal struct {
	s       *session
	waiting bool     // renew its waiters' key too
	marks   []string // tokens whose marks it drops
	want    int64    // the least count Redis may answer without having lost a write
	cmd     *redis.Cmd
}

// renewSessions renews every session in use in one pipeline, takes up the
// grants its waiters were given, and ends what Redis says is gone: a
// session, or its waiters' half, or a session whose writes Redis lost.
func (l *Locker) renewSessions(ctx context.Context) {
	rs, idle := l.books.renewals()
	if len(rs)+len(idle) == 0 {
		return
	}
	leaseMs, waitMs := l.cfg.leaseTTL.Milliseconds(), l.cfg.waitTTL().Milliseconds()
	sent := time.Now()
	send := func(source bool) error {
		var cmds []redis.Cmder
		for _, s := range idle {
			cmds = append(cmds, deletions(ctx, s.keys[0], s.keys[1])...)
		}
		for _, r := range rs {
			args := make([]any, 0, 7+len(r.marks))
			eval, script := renew.head(source)
			args = append(args, eval, script, 2, r.s.keys[0], r.s.keys[1], leaseMs, noArg)
			if r.waiting {
				args[6] = waitMs
			}
			for _, token := range r.marks {
				args = append(args, token)
			}
			r.cmd = redis.NewCmd(ctx, args...)
			cmds = append(cmds, r.cmd)
		}
		return pipeline(ctx, l.client, cmds)
	}
	if err := send(false); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// A pipeline cannot fall back to EVAL by itself. With the source,
		// a SCRIPT FLUSH between loading the script and sending again
		// cannot fail the renewal a second time.
		sent = time.Now()
		send(true) //nolint:errcheck // each command's own error is read below
	}
	for _, r := range rs {
		l.renewed(r, sent)
	}
}

// renewed applies the reply to one session's renewal.
func (l *Locker) renewed(r *renewal, sent time.Time) {
	reply, err := r.cmd.Int64Slice()
	if err == nil && len(reply) != 2 {
		err = fmt.Errorf("fairlock: renew replied %v", reply)
	}
	switch {
	case err != nil:
		l.renewalFailed(r.s, err)
		return
	case reply[0] == 0:
		l.loseSession(r.s)
		return
	case reply[0] < r.want:
		l.rolledBack(r.s)
		return
	}
	r.s.count.renewed(reply[0])
	waiting := reply[1] == 1
	l.books.confirm(r.s, sent, true, waiting)
	// The marks were dropped just after the waiters' key was renewed: the
	// grants were alive then, and live by the holders' key from now on.
	if waiting {
		l.books.tookUp(r.s, r.marks)
	}
	if r.waiting && !waiting {
		l.loseWaiters(r.s)
	}
}

// rolledBack gives up s, whose writes Redis lost: its leases are lost, its
// waiters queue again in a new session, and its keys are deleted, which
// ends whatever the lost writes left behind (a released lease still
// holding its lock, a withdrawn waiter still queued).
func (l *Locker) rolledBack(s *session) {
	l.cfg.observe(Event{Kind: EventWarning, Err: errRolledBack})
	l.loseSession(s)
	l.deleteKeys(s.keys[0], s.keys[1])
}

// renewalFailed reports a failed renewal of s as a failed heartbeat of
// each lock its parties use.
func (l *Locker) renewalFailed(s *session, err error) {
	for ref := range l.books.refsOf(s) {
		l.heartbeatFailed(Event{Kind: EventHeartbeatFailed, Name: ref.name, Lock: ref.kind.lock, Err: err})
	}
}
