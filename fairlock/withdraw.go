package fairlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// withdraw takes wd's token out of its lock now, or leaves it to the
// heartbeat. The caller has counted it out of its own books; its session
// counts it until it is gone.
func (l *Locker) withdraw(ctx context.Context, token string, wd *withdrawal) error {
	err := l.cancelToken(ctx, wd.ref, wd.session, token, wd.hasMeta, wd.forGood)
	l.books.afterWithdrawal(token, wd, err != nil)
	return err
}

// cancelToken runs cancel.lua for token, a party of s: it leaves the
// queue, or gives back its grant; forGood marks it so that a request with
// it that reaches Redis later finds it withdrawn. The call counts itself
// in s (session.count).
func (l *Locker) cancelToken(ctx context.Context, ref *lockRef, s *session, token string, hasMeta, forGood bool) error {
	mark := noArg
	if forGood {
		mark = l.refs.leaseMs
	}
	ticket := s.count.ticket(l.books.isOpen(s))
	err := ref.kind.scripts.Cancel.run(ctx, l.batch, ref.call(token, flag(hasMeta), mark), retried).Err()
	if err == nil {
		s.count.add(ticket)
	}
	return err
}

// retryWithdrawals runs every pending withdrawal once.
func (l *Locker) retryWithdrawals(ctx context.Context) {
	for token, wd := range l.books.pendingWithdrawals() {
		ctx, cancel := context.WithTimeout(ctx, l.cfg.heartbeat())
		err := l.cancelToken(ctx, wd.ref, wd.session, token, wd.hasMeta, wd.forGood)
		cancel()
		if err == nil {
			l.books.retried(token, wd)
		}
	}
}

// leave withdraws w from the queue, waiting for that at most one
// heartbeat: a stalled Redis must not hold up the caller, and the
// heartbeat finishes the job. forGood says that the request that queued w
// may still reach Redis. Then it reports w's end with why.
func (l *Locker) leave(w *waiter, why error, forGood bool) {
	l.books.forget(w)
	left := w.event(EventCancelled)
	left.Wait, left.Queued = time.Since(w.start), w.queued
	wd := &withdrawal{ref: w.ref, session: w.session, hasMeta: w.meta != "", forGood: forGood}
	finished := make(chan struct{})
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		defer close(finished)
		ctx, cancel := context.WithTimeout(l.life, l.cfg.waitTTL())
		defer cancel()
		if err := l.withdraw(ctx, w.token, wd); err != nil {
			why = errors.Join(why, fmt.Errorf("fairlock: leaving the queue: %w", err))
		}
		left.Err = why
		l.cfg.observe(left)
	}()
	timer := time.NewTimer(l.cfg.heartbeat())
	defer timer.Stop()
	select {
	case <-finished:
	case <-timer.C:
	}
}
