package fairlock

import (
	"context"
	"fmt"
	"time"
)

// Turning a grant into a Lease: trusting it, or confirming it first, and
// giving back one that Acquire cannot hand out.

// accept turns a grant notification into a Lease. The grant was made on
// the waiter's behalf, so until this Locker takes it up it lives by the
// session's waiters' key as well as its holders' key and its record (see
// session); the next renewal takes it up. When the earliest of those local
// deadlines is near or past (the message came late, renewals stall, or
// this process was paused), one round trip takes the grant up now, and
// renews the session's holders' key and the record: only that answer moves
// the deadlines the lease lives by.
func (a *attempt) accept(ctx context.Context, w *waiter, fence int64) (*Lease, error) {
	l := a.l
	live, until := l.books.grantDeadline(w)
	if !live || time.Until(until) >= l.cfg.heartbeat() {
		// Trusted, or over already: grant gives back a grant of a session
		// that ended here.
		return l.grant(ctx, w, fence, true, true)
	}
	sent := time.Now()
	args := w.ref.call(w.token, l.cfg.recordTTL().Milliseconds(), flag(w.meta != ""), l.cfg.leaseTTL.Milliseconds())
	held, err := w.ref.kind.scripts.Extend.run(ctx, l.batch, args, retried).Int()
	if err != nil {
		l.leave(w, ctxError(ctx, err), false)
		return nil, ctxError(ctx, failed("acquire", w.ref.name, err))
	}
	if held == 0 {
		l.books.drop(w)
		e := w.event(EventCancelled)
		e.Wait, e.Queued, e.Err = time.Since(w.start), true, fmt.Errorf("%w: %w", ErrPlaceLost, errGrantExpired)
		l.cfg.observe(e)
		return nil, errGrantExpired
	}
	l.books.confirm(w.session, sent, true, false)
	l.books.sentAt(w, sent)
	return l.grant(ctx, w, fence, true, false)
}

// grant makes the Lease for w's granted token and puts it under the
// heartbeat's care. If the Locker was closed meanwhile, the lock is
// released at once rather than left to a holder nobody will return it to.
// queued says whether the token had been reported by EventEnqueued, marked
// whether the grant was made on w's behalf and not taken up yet.
func (l *Locker) grant(ctx context.Context, w *waiter, fence int64, queued, marked bool) (*Lease, error) {
	lease, closed, live := l.newLease(w, fence, queued, marked)
	// A grant given up here ends as EventCancelled; the lease, never handed
	// out, reports no end of its own (see Lease.end).
	switch {
	case closed:
		return nil, l.giveUp(ctx, lease, w, queued, ErrClosed)
	case !live:
		// Its session ended, or outlived its local deadline, meanwhile:
		// nobody here counts the grant as held, and Redis may hold it for
		// as long as requests whose answers never came renew the session.
		// It goes back at once, and the call queues again.
		return nil, l.giveUp(ctx, lease, w, queued, ErrPlaceLost)
	}
	if l.cfg.replicas > 0 {
		if err := l.awaitReplicas(ctx, lease); err != nil {
			return nil, l.giveUp(ctx, lease, w, queued, ctxError(ctx, failed("acquire", w.ref.name, err)))
		}
	}
	lease.mu.Lock()
	lease.granted = time.Now()
	lost := lease.err != nil
	lease.mu.Unlock()
	e := w.event(EventGranted)
	e.Fence, e.Wait, e.Queued = fence, time.Since(w.start), queued
	l.cfg.observe(e)
	if lost {
		// It ended before it was handed out, and Lease.end did not report
		// that: report it now, so every grant has an end.
		e := lease.event(EventLost)
		e.Fence, e.Err = fence, ErrLost
		l.cfg.observe(e)
	}
	return lease, nil
}

// newLease turns w into a Lease and puts it on the books, unless the
// Locker closed or w's session ended meanwhile.
func (l *Locker) newLease(w *waiter, fence int64, queued, marked bool) (lease *Lease, closed, live bool) {
	lease = &Lease{
		locker:   l,
		ref:      w.ref,
		session:  w.session,
		shared:   w.req.shared,
		permits:  w.req.permits,
		group:    w.group,
		weight:   w.weight,
		token:    w.token,
		tokenArg: w.tokenArg,
		fence:    fence,
		hasMeta:  w.meta != "",
		queued:   queued,
	}
	lease.marked.Store(marked)
	until := l.books.recordEnd(w)
	closed, live = l.books.holdLease(lease, w, marked)
	lease.mu.Lock()
	lease.setRecordUntil(until)
	lease.renewAt = time.Now().Add(l.cfg.keepTTL() / 3)
	lease.mu.Unlock()
	return lease, closed, live
}

// giveUp releases a grant that Acquire does not hand out, waiting for that
// at most a heartbeat, and reports the call's end with err.
func (l *Locker) giveUp(ctx context.Context, lease *Lease, w *waiter, queued bool, err error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.heartbeat())
	defer cancel()
	lease.Release(ctx) //nolint:errcheck // best effort: the Locker retries a release Redis did not answer
	e := w.event(EventCancelled)
	e.Wait, e.Queued, e.Err = time.Since(w.start), queued, err
	l.cfg.observe(e)
	return err
}
