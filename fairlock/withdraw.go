package fairlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// withdraw takes token out of ref's lock now, or leaves it to the
// heartbeat. The caller has counted it out of its own books; its session
// counts it until it is gone.
func (l *Locker) withdraw(ctx context.Context, ref *lockRef, s *session, token string, hasMeta bool) error {
	err := l.cancelToken(ctx, ref, token, hasMeta)
	l.books.mu.Lock()
	defer l.books.mu.Unlock()
	if err != nil {
		if _, live := l.books.sessions[s]; live {
			l.books.pending[token] = &withdrawal{ref: ref, session: s, hasMeta: hasMeta}
			return err
		}
	}
	s.left()
	return err
}

// cancelToken runs cancel.lua for token: it leaves the queue, or gives
// back its grant.
func (l *Locker) cancelToken(ctx context.Context, ref *lockRef, token string, hasMeta bool) error {
	return ref.kind.scripts.cancel.run(ctx, l.client, ref.call(token, flag(hasMeta)), retried).Err()
}

// retryWithdrawals runs every pending withdrawal once.
func (l *Locker) retryWithdrawals() {
	l.books.mu.Lock()
	pending := make(map[string]*withdrawal, len(l.books.pending))
	for token, wd := range l.books.pending {
		pending[token] = wd
	}
	l.books.mu.Unlock()
	for token, wd := range pending {
		ctx, cancel := context.WithTimeout(context.Background(), l.cfg.heartbeat())
		err := l.cancelToken(ctx, wd.ref, token, wd.hasMeta)
		cancel()
		if err != nil {
			continue
		}
		l.books.mu.Lock()
		if l.books.pending[token] == wd {
			delete(l.books.pending, token)
			wd.session.left()
		}
		l.books.mu.Unlock()
	}
}

// leave withdraws w from the queue, waiting for that at most one
// heartbeat: a stalled Redis must not hold up the caller, and the
// heartbeat finishes the job. Then it reports w's end with why.
func (l *Locker) leave(w *waiter, why error) {
	l.forget(w)
	left := w.event(EventCancelled)
	left.Wait, left.Queued = time.Since(w.start), w.queued
	finished := make(chan struct{})
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		defer close(finished)
		ctx, cancel := context.WithTimeout(context.Background(), l.cfg.waitTTL())
		defer cancel()
		if err := l.withdraw(ctx, w.ref, w.session, w.token, w.meta != ""); err != nil {
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
