package fairlock

import (
	"context"
	"time"

	"github.com/fairlock/fairlock/scripts"
	"github.com/redis/go-redis/v9"
)

// heartbeatLoop is the Locker's one timer. Each period it renews the
// sessions, reads back the records of the leases held here (one command
// per Batch of them), checks on the waiters (one call per lock with
// waiters here), renews the records of leases that are due (every third of
// keepTTL), all in one pipeline, and retries withdrawals.
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
	calls, renewals, checks := l.heartbeatCalls()
	if len(calls)+len(renewals)+len(checks) > 0 {
		sent := time.Now()
		l.runHeartbeats(ctx, calls, renewals, checks) //nolint:errcheck // each call's own error is read below
		for _, c := range calls {
			l.applyHeartbeat(c)
		}
		for _, c := range checks {
			c.apply()
		}
		for _, r := range renewals {
			switch held, err := r.cmd.Int(); {
			case err != nil:
				l.cfg.observe(Event{Kind: EventHeartbeatFailed, Name: r.lease.ref.name, Lock: r.lease.ref.kind.lock, Err: err})
			case held == 1:
				r.lease.renewed(sent)
			default:
				r.lease.lose()
			}
		}
	}
	l.retryWithdrawals(ctx)
	l.notifier.dropIdle(l.inUse)
}

// heartbeatCall is one heartbeat.lua call: up to scripts.Batch waiters of
// this Locker on one lock.
type heartbeatCall struct {
	ref             *lockRef
	capacity, limit any
	waiters         []*waiter
	positions, keep bool
	cmd             *redis.Cmd
}

// recordRenewal is one lease's extend.lua call.
type recordRenewal struct {
	lease *Lease
	cmd   *redis.Cmd
}

// A leaseCheck reads back the records of some leases: that Redis still has
// them is what a session cannot tell (a failover that lost the grant but
// not the session, a forced release, an evicted key). A mutex's are its
// lock keys, read with MGET, scripts.Batch at a time (one GET each on
// Cluster, where keys of different slots cannot share a command); a
// semaphore's are its holders, read with ZMSCORE, one command per lock.
type leaseCheck struct {
	leases []*Lease
	args   []any
	cmd    *redis.Cmd
}

func (c *leaseCheck) apply() {
	if c.args[0] == "get" {
		switch token, err := c.cmd.Text(); {
		case err == redis.Nil || (err == nil && token != c.leases[0].token):
			c.leases[0].vanished()
		}
		return
	}
	vals, err := c.cmd.Slice()
	if err != nil || len(vals) != len(c.leases) {
		return // the next heartbeat reads them again; the deadlines hold meanwhile
	}
	for i, s := range c.leases {
		if held := vals[i] != nil && (s.ref.kind != mutexKind || vals[i] == s.token); !held {
			s.vanished()
		}
	}
}

// heartbeatCalls lists the calls of one heartbeat.
func (l *Locker) heartbeatCalls() ([]*heartbeatCall, []*recordRenewal, []*leaseCheck) {
	b := &l.books
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	var calls []*heartbeatCall
	var renewals []*recordRenewal
	var checks []*leaseCheck
	var mget *leaseCheck
	for _, ll := range b.locks {
		var zmscore *leaseCheck
		for s := range ll.leases {
			if s.needsRenewal(now) {
				renewals = append(renewals, &recordRenewal{lease: s})
			}
			switch {
			case ll.ref.kind != mutexKind:
				if zmscore == nil {
					zmscore = &leaseCheck{args: []any{"zmscore", ll.ref.args[0]}}
					checks = append(checks, zmscore)
				}
				zmscore.leases, zmscore.args = append(zmscore.leases, s), append(zmscore.args, s.token)
			case l.sharded:
				checks = append(checks, &leaseCheck{leases: []*Lease{s}, args: []any{"get", ll.ref.args[0]}})
			default:
				if mget == nil || len(mget.leases) == scripts.Batch {
					mget = &leaseCheck{args: []any{"mget"}}
					checks = append(checks, mget)
				}
				mget.leases, mget.args = append(mget.leases, s), append(mget.args, ll.ref.args[0])
			}
		}
		if len(ll.waiters) == 0 {
			continue
		}
		keep := now.Sub(ll.keptAt) > l.cfg.keepTTL()/3
		if keep {
			ll.keptAt = now
		}
		var c *heartbeatCall
		for w := range ll.waiters {
			if c == nil || len(c.waiters) == scripts.Batch {
				c = &heartbeatCall{ref: ll.ref, capacity: ll.capacity, limit: ll.limit, positions: l.cfg.wantsPositions(), keep: keep}
				calls = append(calls, c)
			}
			c.waiters = append(c.waiters, w)
			c.positions = c.positions || w.onPosition != nil
		}
	}
	return calls, renewals, checks
}

// runHeartbeats sends every call in one pipeline. A pipeline cannot fall
// back from EVALSHA to EVAL by itself, so on NOSCRIPT (after SCRIPT FLUSH
// or a restart) it loads the scripts and sends the batch once more.
func (l *Locker) runHeartbeats(ctx context.Context, calls []*heartbeatCall, renewals []*recordRenewal, checks []*leaseCheck) error {
	recordMs := l.cfg.recordTTL().Milliseconds()
	send := func() error {
		_, err := l.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, c := range calls {
				args := c.ref.call(c.capacity, c.limit, flag(c.positions), flag(c.keep))
				for _, w := range c.waiters {
					args = append(args, w.token)
				}
				args[0], args[1] = "evalsha", c.ref.kind.scripts.heartbeat.sha
				c.cmd = redis.NewCmd(ctx, args...)
				p.Process(ctx, c.cmd) //nolint:errcheck // read from cmd
			}
			for _, r := range renewals {
				s := r.lease
				args := s.ref.call(s.token, recordMs, flag(s.hasMeta), noArg)
				args[0], args[1] = "evalsha", s.ref.kind.scripts.extend.sha
				r.cmd = redis.NewCmd(ctx, args...)
				p.Process(ctx, r.cmd) //nolint:errcheck // read from cmd
			}
			for _, c := range checks {
				c.cmd = p.Do(ctx, c.args...)
			}
			return nil
		})
		return err
	}
	err := send()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		for _, set := range []*scriptSet{mutexScripts, countedScripts} {
			for _, s := range []*luaScript{set.heartbeat, set.extend} {
				if err = s.Load(ctx, l.client).Err(); err != nil {
					return err
				}
			}
		}
		err = send()
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
		l.cfg.observe(Event{Kind: EventHeartbeatFailed, Name: c.ref.name, Lock: c.ref.kind.lock, Err: err})
		return
	}
	type move struct {
		w        *waiter
		position int
	}
	var moved []move
	l.books.mu.Lock()
	for i, w := range c.waiters {
		if l.books.waiters[w.token] != w {
			continue // granted or gone meanwhile
		}
		switch status := st[i]; {
		case status < 0:
			if p := int(-status); c.positions && p != w.position {
				w.position = p
				moved = append(moved, move{w, p})
			}
		case status == 0:
			evict(w)
		default:
			deliver(w, status)
		}
	}
	l.books.mu.Unlock()
	for _, m := range moved {
		e := m.w.event(EventMoved)
		e.Position = m.position
		l.cfg.observe(e)
		if m.w.onPosition != nil {
			m.w.onPosition(m.position)
		}
	}
}

// delivered routes a grant message to the waiters it names.
func (l *Locker) delivered(payload string) {
	l.books.mu.Lock()
	defer l.books.mu.Unlock()
	parseGrants(payload, func(token string, fence int64) {
		if w := l.books.waiters[token]; w != nil {
			deliver(w, fence)
		}
	})
}

// inUse tells whether this Locker has parties on locks called name.
func (l *Locker) inUse(name string) bool {
	l.books.mu.Lock()
	defer l.books.mu.Unlock()
	for key := range l.books.locks {
		if key.name == name {
			return true
		}
	}
	return false
}
