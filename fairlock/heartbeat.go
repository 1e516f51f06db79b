package fairlock

import (
	"context"
	"time"
)

// heartbeatLoop is the Locker's one timer. Each period it sends one
// heartbeat per lock that has local waiters or leases, all in one pipeline,
// however many waiters there are.
func (l *Locker) heartbeatLoop() {
	defer l.bg.Done()
	t := time.NewTicker(l.heartbeat)
	defer t.Stop()
	for {
		select {
		case <-l.stopped:
			return
		case <-t.C:
		case <-l.kick:
		}
		l.beat()
		l.dropIdleChannels()
	}
}

// kickHeartbeat asks for a heartbeat now, after notifications may have been
// lost.
func (l *Locker) kickHeartbeat() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

func (l *Locker) beat() {
	l.retryWithdrawals()
	calls := l.heartbeatCalls()
	if len(calls) == 0 {
		return
	}
	sent := time.Now()
	// Bounded by the waiter TTL, not the period: a heartbeat that waits for
	// a pooled connection under load is still worth its reply until then.
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.waiterTTL)
	l.runHeartbeats(ctx, calls) //nolint:errcheck // each call's own error is read below
	cancel()
	for _, c := range calls {
		res, cerr := c.cmd.Result()
		if cerr == nil {
			var st []int64
			if st, cerr = parseInts(res, len(c.holders)+len(c.tokens)); cerr == nil {
				l.applyHeartbeat(c, st, sent)
				continue
			}
		}
		l.observe(Event{Kind: EventHeartbeatFailed, Name: c.ref.name, Lock: c.ref.kind, Err: cerr})
		l.evictUnconfirmed(c.tokens)
	}
}

// heartbeatCallSize caps the waiters of one heartbeat script: a call for
// 10,000 waiters would hold Redis for milliseconds, and other clients'
// commands run between the calls of one pipeline.
const heartbeatCallSize = 1000

// heartbeatCalls lists the calls of one heartbeat: per lock with local
// waiters or a lease to renew, one call per heartbeatCallSize waiters.
func (l *Locker) heartbeatCalls() []*heartbeatCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	var calls []*heartbeatCall
	for _, ll := range l.locks {
		positions := l.wantsPositions()
		c := &heartbeatCall{ref: ll.ref, capacity: ll.capacity, positions: positions}
		for _, s := range ll.leases {
			if s.needsHeartbeat() {
				c.holders = append(c.holders, s)
			}
		}
		for w := range ll.waiters {
			if len(c.holders)+len(c.tokens) == heartbeatCallSize {
				calls = append(calls, c)
				c = &heartbeatCall{ref: ll.ref, capacity: ll.capacity, positions: positions}
			}
			c.tokens = append(c.tokens, w.token)
			c.positions = c.positions || w.onPosition != nil
		}
		if len(c.holders) > 0 || len(c.tokens) > 0 {
			calls = append(calls, c)
		}
	}
	return calls
}

func (l *Locker) applyHeartbeat(c *heartbeatCall, st []int64, sent time.Time) {
	for i, s := range c.holders {
		if st[i] == 1 {
			s.renewed(sent)
		} else {
			s.lose()
		}
	}
	st = st[len(c.holders):]
	// A waiter's status is its fence if granted, 0 if it lost its place,
	// and -position (or -1, uncounted) while it waits.
	type move struct {
		w        *waiter
		token    string
		position int
	}
	var moved []move
	l.mu.Lock()
	for i, token := range c.tokens {
		w := l.waiters[token]
		if w == nil {
			continue // granted or gone meanwhile
		}
		switch status := st[i]; {
		case status < 0:
			w.since = sent
			if p := int(-status); c.positions && p != w.position {
				w.position = p
				moved = append(moved, move{w, token, p})
			}
		case status == 0:
			signal(w.evicted)
		default:
			deliver(w, status)
		}
	}
	l.mu.Unlock()
	for _, m := range moved {
		e := m.w.event(EventMoved)
		e.Token, e.Position = m.token, m.position
		l.observe(e)
		if m.w.onPosition != nil {
			m.w.onPosition(m.position)
		}
	}
}

// evictUnconfirmed tells waiters whose place Redis has not confirmed for a
// waiter TTL that they lost it: they queue again, which either succeeds or
// returns Redis's error to the caller, so no Acquire waits on a Redis that
// is gone for longer than that.
func (l *Locker) evictUnconfirmed(tokens []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, token := range tokens {
		if w := l.waiters[token]; w != nil && time.Since(w.since) > l.cfg.waiterTTL {
			signal(w.evicted)
		}
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// deliver hands a grant to a waiter once; repeats (message and heartbeat
// both) are dropped.
func deliver(w *waiter, fence int64) {
	select {
	case w.granted <- fence:
	default:
	}
}
