package fairlock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// heartbeatLoop is the Locker's one timer. Each period it renews the
// sessions, reads back the records of the leases held here (one command
// per Batch of them), checks on the waiters (one heartbeat.lua call per
// lock with waiters here, and a ZMSCORE per Batch of them), renews the
// records of leases that are due (every third of keepTTL), all in one
// pipeline, and retries withdrawals.
func (l *Locker) heartbeatLoop() {
	defer l.bg.Done()
	t := time.NewTicker(l.cfg.heartbeat())
	defer t.Stop()
	for {
		select {
		case <-l.stopped:
			return
		case <-t.C:
		case <-l.kick:
		}
		l.beat()
	}
}

func (l *Locker) beat() {
	// Bounded by the waiter TTL, not the period: a heartbeat that waits for
	// a pooled connection under load is still worth its reply until then.
	ctx, cancel := context.WithTimeout(l.life, l.cfg.waitTTL())
	defer cancel()
	l.renewSessions(ctx)
	p := l.books.heartbeatPlan(l.sharded)
	if len(p.calls)+len(p.queued)+len(p.marks)+len(p.renewals)+len(p.checks) > 0 {
		sent := time.Now()
		l.runHeartbeats(ctx, p) //nolint:errcheck // each call's own error is read below
		for _, c := range p.calls {
			l.applyHeartbeat(c)
		}
		gone := map[*waiter]bool{}
		for _, q := range p.queued {
			if scores, err := q.scores(); err != nil {
				l.heartbeatFailed(Event{Kind: EventHeartbeatFailed, Name: q.ref.name, Lock: q.ref.kind.lock, Err: err})
			} else {
				l.books.goneFromQueue(q, scores, gone)
			}
		}
		for _, m := range p.marks {
			if marks, err := m.cmd.Result(); err != nil {
				l.heartbeatFailed(Event{Kind: EventHeartbeatFailed, Err: err})
			} else {
				l.books.markedGranted(marks, gone)
			}
		}
		if len(gone) > 0 {
			l.askGone(ctx, gone)
		}
		for _, c := range p.checks {
			if err := c.apply(); err != nil {
				e := Event{Kind: EventHeartbeatFailed, Err: err}
				if len(c.leases) == 1 {
					e.Name, e.Lock = c.leases[0].ref.name, c.leases[0].ref.kind.lock
				}
				l.heartbeatFailed(e)
			}
		}
		for _, r := range p.renewals {
			switch held, err := r.cmd.Int(); {
			case err != nil:
				l.heartbeatFailed(Event{Kind: EventHeartbeatFailed, Name: r.lease.ref.name, Lock: r.lease.ref.kind.lock, Err: err})
			case held == 1:
				r.lease.renewed(sent)
			default:
				r.lease.lose()
			}
		}
	}
	l.retryWithdrawals(ctx)
	l.notifier.dropIdle(l.books.inUse)
}

// A heartbeatPlan is what one heartbeat sends, in one pipeline, in this
// order: the heartbeat.lua calls, the queue checks and the reads of marks
// after them (a waiter a call granted is gone from the order set, and
// marked), the renewals of lease records and the reads of leases.
type heartbeatPlan struct {
	calls    []*heartbeatCall
	queued   []*queueCheck
	marks    []*markRead
	renewals []*recordRenewal
	checks   []*leaseCheck
}

// heartbeatCall is one heartbeat.lua call: up to scripts.Batch waiters of
// this Locker on one lock.
type heartbeatCall struct {
	ref             *lockRef
	capacity, limit int // as localLock's
	waiters         []*waiter
	positions, keep bool
	cmd             *redis.Cmd
}

// A queueCheck asks Redis whether up to scripts.Batch waiters of this
// Locker on one lock are still queued: one ZMSCORE on the lock's order
// set. A heartbeat.lua call carries only the waiters that want their
// place and the newest waiter of each line the others wait in (which
// keeps that line's keys, and is the first to go when a failover loses
// the latest writes); the rest are asked about here, without a script,
// which costs Redis a fraction of carrying them through one. A waiter the
// order set no longer has was granted or lost its place: askGone asks
// heartbeat.lua which.
//
// Each heartbeat asks about up to scripts.Batch waiters of a lock. A
// Locker with more on one lock asks about each once every `every`
// heartbeats (the least power of two with every × Batch at least their
// number), by its token's number, and learns of the grants among the
// others each heartbeat from their sessions' marks (markRead); one found
// to have lost its place has the next heartbeat, at once, ask about all.
// So a waiter's grant is found within a heartbeat however many wait, and
// its lost place within 2 × n / Batch heartbeats, which is one for
// n ≤ Batch. Asking about all 10,000 idle waiters each heartbeat took most
// of their Redis time (docs/benchmarks.md).
type queueCheck struct {
	ref     *lockRef
	waiters []*waiter
	cmd     *redis.Cmd
}

// A markRead reads the marks of one session (scripts/lib/tokens.lua): the
// grants made to its waiters that it has not taken up are marked "u".
type markRead struct {
	session *session
	cmd     *redis.MapStringStringCmd
}

// recordRenewal is one lease's extend.lua call.
type recordRenewal struct {
	lease *Lease
	cmd   *redis.Cmd
}

// A leaseCheck reads back the records of some leases: that Redis still has
// them is what a session cannot tell (a failover that lost the grant but
// not the session, a forced release, an evicted key). Where a lock's
// holders are a sorted set (kind.holderSet), a lease's record is its
// member there, read with ZMSCORE, one command per lock; else it is the
// lock's one key, whose value is the holder's token, read with MGET,
// scripts.Batch at a time (one GET each on Cluster, where keys of
// different slots cannot share a command).
type leaseCheck struct {
	leases []*Lease
	args   []any
	cmd    *redis.Cmd
}

// apply ends the leases whose records are gone. A read that failed is
// returned, to report: the next heartbeat reads them again, and the
// deadlines hold meanwhile (a refusal went unseen this way: the ACL rule
// once lacked MGET).
func (c *leaseCheck) apply() error {
	if c.args[0] == "get" {
		switch token, err := c.cmd.Text(); {
		case err == redis.Nil || (err == nil && token != c.leases[0].token):
			c.leases[0].vanished()
		case err != nil:
			return err
		}
		return nil
	}
	vals, err := c.cmd.Slice()
	if err == nil && len(vals) != len(c.leases) {
		err = fmt.Errorf("fairlock: %s replied %d values for %d leases", c.args[0], len(vals), len(c.leases))
	}
	if err != nil {
		return err
	}
	for i, lease := range c.leases {
		if held := vals[i] != nil && (lease.ref.kind.holderSet || vals[i] == lease.token); !held {
			lease.vanished()
		}
	}
	return nil
}

// waiterLine names the line a waiter waits in: its priority's, and with
// groups its group's (scripts/lib/lanes.lua, lib/counted/queue.lua).
type waiterLine struct {
	priority int
	group    string
}

// runHeartbeats sends every call of p in one pipeline. A pipeline cannot
// fall back from EVALSHA to EVAL by itself, so on NOSCRIPT (after SCRIPT
// FLUSH or a restart) it sends the batch once more with the scripts'
// text, which loads them too, and which a SCRIPT FLUSH meanwhile cannot
// fail again.
func (l *Locker) runHeartbeats(ctx context.Context, p *heartbeatPlan) error {
	recordMs := l.cfg.recordTTL().Milliseconds()
	send := func(source bool) error {
		var cmds []redis.Cmder
		for _, c := range p.calls {
			capacity, limit := c.ref.countArgs(c.capacity, c.limit)
			args := c.ref.call(capacity, limit, flag(c.positions), flag(c.keep))
			for _, w := range c.waiters {
				args = append(args, w.tokenArg)
			}
			args[0], args[1] = c.ref.kind.scripts.Heartbeat.head(source)
			c.cmd = redis.NewCmd(ctx, args...)
			cmds = append(cmds, c.cmd)
		}
		for _, q := range p.queued {
			args := make([]any, 0, 2+len(q.waiters))
			args = append(args, "zmscore", q.ref.keys[2])
			for _, w := range q.waiters {
				args = append(args, w.tokenArg)
			}
			q.cmd = redis.NewCmd(ctx, args...)
			cmds = append(cmds, q.cmd)
		}
		for _, m := range p.marks {
			m.cmd = redis.NewMapStringStringCmd(ctx, "hgetall", m.session.keys[0])
			cmds = append(cmds, m.cmd)
		}
		for _, r := range p.renewals {
			lease := r.lease
			args := lease.ref.call(lease.token, recordMs, flag(lease.hasMeta), noArg)
			args[0], args[1] = lease.ref.kind.scripts.Extend.head(source)
			r.cmd = redis.NewCmd(ctx, args...)
			cmds = append(cmds, r.cmd)
		}
		for _, c := range p.checks {
			c.cmd = redis.NewCmd(ctx, c.args...)
			cmds = append(cmds, c.cmd)
		}
		return pipeline(ctx, l.client, cmds)
	}
	err := send(false)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		err = send(true)
	}
	return err
}

// applyHeartbeat hands each waiter its state: a grant whose message was
// lost, a lost place, or a new position.
func (l *Locker) applyHeartbeat(c *heartbeatCall) {
	res, err := c.cmd.Result()
	var st []int64
	if err == nil {
		st, err = parseInts(res, len(c.waiters))
	}
	if err != nil {
		l.heartbeatFailed(Event{Kind: EventHeartbeatFailed, Name: c.ref.name, Lock: c.ref.kind.lock, Err: err})
		return
	}
	moved, kick := l.books.heartbeatStates(c, st)
	if kick {
		l.kickHeartbeat()
	}
	for _, m := range moved {
		e := m.w.event(EventMoved)
		e.Position = m.position
		l.cfg.observe(e)
		if m.w.onPosition != nil {
			m.w.onPosition(m.position)
		}
	}
}

// scores reads q's reply: each waiter's score in the order set, nil if it
// is gone.
func (q *queueCheck) scores() ([]any, error) {
	scores, err := q.cmd.Slice()
	if err == nil && len(scores) != len(q.waiters) {
		err = fmt.Errorf("fairlock: ZMSCORE replied %d scores for %d waiters", len(scores), len(q.waiters))
	}
	return scores, err
}

// askGone asks heartbeat.lua about the waiters gone from the order set or
// marked granted: each was granted (its grant's message may be lost) or
// lost its place. It is a second round trip, only after a grant or a loss.
func (l *Locker) askGone(ctx context.Context, gone map[*waiter]bool) {
	p := l.books.askPlan(gone)
	l.runHeartbeats(ctx, p) //nolint:errcheck // each call's own error is read below
	for _, c := range p.calls {
		l.applyHeartbeat(c)
	}
}

// heartbeatFailed reports a part of a heartbeat that failed, but for
// TRYAGAIN: a command whose keys a slot migration has split was not run,
// and the heartbeat runs again in a moment (retryPause) instead, as the
// migration moves the rest of the keys.
func (l *Locker) heartbeatFailed(e Event) {
	if redis.IsTryAgainError(e.Err) {
		time.AfterFunc(retryPause, l.kickHeartbeat)
		return
	}
	l.cfg.observe(e)
}
