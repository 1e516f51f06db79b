package fairlock

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// sessionFor returns the session that a new party on ref joins, counted
// in. books.mu is held.
func (l *Locker) sessionFor(ref *lockRef) *session {
	b := &l.books
	s := b.current[ref.scope]
	if s == nil {
		b.seq++
		id := l.id + "." + strconv.FormatUint(b.seq, 36)
		key := ref.sessions + id
		s = &session{id: id, scope: ref.scope, keys: [2]any{key, key + ":w"},
			leases: map[*Lease]struct{}{}, waiters: map[*waiter]struct{}{}}
		b.current[ref.scope] = s
		b.sessions[s] = struct{}{}
	}
	s.parties++
	return s
}

// openArgs are what a call that opens s sends (acquire.lua's last ARGV):
// the TTLs of its keys and of its grants' records, in ms. nil once s is
// open. books.mu is held.
func (l *Locker) openArgs(s *session) []any {
	if s.opened {
		return nil
	}
	return []any{l.cfg.leaseTTL.Milliseconds(), l.cfg.waitTTL().Milliseconds(), l.cfg.recordTTL().Milliseconds()}
}

// confirm records that Redis answered a call that renewed (or opened) s,
// sent at sent, and moves its deadlines.
func (l *Locker) confirm(s *session, sent time.Time, holders, waiters bool) {
	l.books.mu.Lock()
	defer l.books.mu.Unlock()
	if _, live := l.books.sessions[s]; !live {
		return
	}
	s.opened = true
	if holders {
		s.leaseUntil = sent.Add(l.cfg.leaseTTL - l.cfg.margin())
		if s.expiry == nil {
			s.expiry = time.AfterFunc(time.Until(s.leaseUntil), func() { l.sessionExpired(s) })
		} else {
			s.expiry.Reset(time.Until(s.leaseUntil))
		}
	}
	if waiters && !s.waitLost {
		s.waitUntil = sent.Add(l.cfg.waitTTL())
	}
}

// sessionExpired ends s when its local deadline passed unrenewed.
func (l *Locker) sessionExpired(s *session) {
	l.books.mu.Lock()
	late := time.Now().After(s.leaseUntil)
	l.books.mu.Unlock()
	if late {
		l.loseSession(s)
	}
}

// loseSession ends s: Redis no longer has it, or may not. Its leases are
// lost, its waiters queue again in a new session, and its withdrawals are
// dropped, since Redis forgets their records with it.
func (l *Locker) loseSession(s *session) {
	leases, waiters := l.retire(s, true)
	for _, w := range waiters {
		evict(w)
	}
	for _, lease := range leases {
		lease.lose()
	}
}

// loseWaiters ends the waiting half of s: its waiters queue again in a new
// session; its leases stay.
func (l *Locker) loseWaiters(s *session) {
	_, waiters := l.retire(s, false)
	for _, w := range waiters {
		evict(w)
	}
}

// retire takes s out of use, and returns its parties to end: its leases
// too if all is set.
func (l *Locker) retire(s *session, all bool) ([]*Lease, []*waiter) {
	b := &l.books
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.current[s.scope] == s {
		delete(b.current, s.scope)
	}
	s.waitLost = true
	waiters := make([]*waiter, 0, len(s.waiters))
	for w := range s.waiters {
		waiters = append(waiters, w)
	}
	if !all {
		return nil, waiters
	}
	delete(b.sessions, s)
	if s.expiry != nil {
		s.expiry.Stop()
	}
	for token, wd := range b.pending {
		if wd.session == s {
			delete(b.pending, token)
			s.left()
		}
	}
	leases := make([]*Lease, 0, len(s.leases))
	for lease := range s.leases {
		leases = append(leases, lease)
	}
	return leases, waiters
}

// renewal is one session's renewal: its commands in the heartbeat's
// pipeline.
type renewal struct {
	s                *session
	waiting          bool // renew its waiters' key too
	holders, waiters *redis.BoolCmd
}

// renewals lists the sessions to renew, and forgets those idle for a
// heartbeat: their keys are deleted, and would expire anyway.
func (l *Locker) renewals() (renew []*renewal, idle []*session) {
	b := &l.books
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.sessions {
		switch {
		case s.parties == 0 && time.Since(s.idle) > l.cfg.heartbeat():
			delete(b.sessions, s)
			if b.current[s.scope] == s {
				delete(b.current, s.scope)
			}
			if s.expiry != nil {
				s.expiry.Stop()
			}
			if s.opened {
				idle = append(idle, s)
			}
		case s.opened:
			renew = append(renew, &renewal{s: s, waiting: !s.waitLost})
		}
	}
	return renew, idle
}

// renewSessions renews every session in use in one pipeline, and ends
// what Redis says is gone: a session, or its waiters' half.
func (l *Locker) renewSessions(ctx context.Context) {
	rs, idle := l.renewals()
	if len(rs)+len(idle) == 0 {
		return
	}
	sent := time.Now()
	p := l.client.Pipeline()
	for _, s := range idle {
		p.Del(ctx, s.keys[0].(string))
		p.Del(ctx, s.keys[1].(string))
	}
	for _, r := range rs {
		r.holders = p.PExpire(ctx, r.s.keys[0].(string), l.cfg.leaseTTL)
		if r.waiting {
			r.waiters = p.PExpire(ctx, r.s.keys[1].(string), l.cfg.waitTTL())
		}
	}
	p.Exec(ctx) //nolint:errcheck // each command's own error is read below
	for _, r := range rs {
		held, err := r.holders.Result()
		if err != nil {
			l.renewalFailed(r.s, err)
			continue
		}
		if !held {
			l.loseSession(r.s)
			continue
		}
		waiting := r.waiters != nil && r.waiters.Val()
		l.confirm(r.s, sent, true, waiting)
		if r.waiters != nil && r.waiters.Err() == nil && !waiting {
			l.loseWaiters(r.s)
		}
	}
}

// renewalFailed reports a failed renewal of s as a failed heartbeat of
// each lock its parties use.
func (l *Locker) renewalFailed(s *session, err error) {
	l.books.mu.Lock()
	refs := map[*lockRef]bool{}
	for lease := range s.leases {
		refs[lease.ref] = true
	}
	for w := range s.waiters {
		refs[w.ref] = true
	}
	l.books.mu.Unlock()
	for ref := range refs {
		l.cfg.observe(Event{Kind: EventHeartbeatFailed, Name: ref.name, Lock: ref.kind.lock, Err: err})
	}
}

// expireWaiters ends the waiting half of sessions whose waiters' key may
// have expired in Redis: no renewal was answered for a waiter TTL.
func (l *Locker) expireWaiters() {
	l.books.mu.Lock()
	var late []*session
	for s := range l.books.sessions {
		if s.opened && !s.waitLost && len(s.waiters) > 0 && time.Now().After(s.waitUntil) {
			late = append(late, s)
		}
	}
	l.books.mu.Unlock()
	for _, s := range late {
		l.loseWaiters(s)
	}
}

// closeSessions deletes the keys of every session, so that whatever the
// Locker leaves behind is seen as dead at once rather than after its TTL.
func (l *Locker) closeSessions(ctx context.Context) error {
	l.books.mu.Lock()
	var keys []string
	for s := range l.books.sessions {
		if s.opened {
			keys = append(keys, s.keys[0].(string), s.keys[1].(string))
		}
		if s.expiry != nil {
			s.expiry.Stop()
		}
	}
	l.books.mu.Unlock()
	p := l.client.Pipeline()
	for _, key := range keys {
		p.Del(ctx, key) // one each: on Cluster they live in different slots
	}
	if len(keys) == 0 {
		return nil
	}
	_, err := p.Exec(ctx)
	return err
}
