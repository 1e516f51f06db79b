package fairlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fairlock/fairlock/scripts"
	"github.com/redis/go-redis/v9"
)

// Sending a request that brings a token: the fast path's or acquire.lua,
// neither ever sent twice (see once), and learning what became of one
// whose answer was lost (recover.lua).

// errWithdrawn means a request whose answer was lost had not reached Redis,
// and its token is withdrawn for good: the call starts again.
var errWithdrawn = errors.New("fairlock: request withdrawn after its answer was lost")

// errQueuedFirst means the fast path took a lock whose queue has waiters,
// who may have come first: it hands the lock to them and queues.
var errQueuedFirst = errors.New("fairlock: waiters queued")

// tryFast runs the fast path; done is false when the call goes on to the
// script (the lock is held, or it was free with waiters queued, whom the
// fast path handed it to).
func (a *attempt) tryFast(ctx context.Context, w *waiter, open []any) (lease *Lease, done bool, err error) {
	sent := a.l.books.sentAt(w, time.Now())
	fence, outcome, err := a.l.fastAcquire(ctx, w, open)
	if err != nil && !isRedisError(err) {
		// The answer was lost, maybe not the request: it took the lock, or
		// it is withdrawn now.
		fence, err = a.fateOf(ctx, w, fastRequest, failed("acquire", w.ref.name, err))
		switch {
		case err == errSessionGone:
			return nil, false, err
		case err == errQueuedFirst:
			outcome, err = fastQueued, a.l.cancelToken(ctx, w.ref, w.session, w.token, false, false)
		case err != nil:
			return nil, true, ctxError(ctx, err)
		case fence <= 0:
			a.l.books.withdrawn(w, open)
			return nil, false, errWithdrawn
		default:
			outcome = fastGranted
		}
	}
	switch {
	case err != nil:
		// Redis refused a command: withdraw the token, whose SET may have
		// run.
		return nil, true, ctxError(ctx, a.fail(w, failed("acquire", w.ref.name, err), true))
	case outcome == fastSessionGone:
		return nil, false, a.l.sessionGone(w)
	case outcome == fastGranted:
		if open != nil {
			a.l.books.confirm(w.session, sent, true, true)
		}
		lease, err := a.l.grant(ctx, w, fence, false, false)
		if err == ErrPlaceLost {
			return nil, false, errSessionGone
		}
		return lease, true, err
	}
	if open != nil {
		a.l.books.confirm(w.session, sent, true, true)
	}
	return nil, false, nil
}

// enqueue runs acquire.lua for w, in the Locker's next batch (batch.go):
// a call whose context ends stops waiting for its answer, as for a lost
// one.
func (a *attempt) enqueue(ctx context.Context, w *waiter, open []any) (int64, error) {
	sent := a.l.books.sentAt(w, time.Now())
	reply, err := w.ref.kind.scripts.Acquire.run(ctx, a.l.batch, a.acquireArgs(w, open), once).Int64()
	if err != nil && !isRedisError(err) {
		// The answer was lost, maybe not the request.
		if reply, err = a.fateOf(ctx, w, a.mode, err); err == nil && reply == 0 {
			a.l.books.withdrawn(w, open)
			return 0, errWithdrawn
		}
		if err != nil {
			return 0, err
		}
	}
	return a.enqueued(w, open, sent, reply, err)
}

// acquireArgs are acquire.lua's arguments for w's request.
func (a *attempt) acquireArgs(w *waiter, open []any) []any {
	capacity, limit := w.ref.countArgs(a.req.capacity, a.req.limit)
	args := w.ref.call(w.tokenArg, a.mode.arg(), metaValue(w.meta), capacity, limit, w.group, w.weight)
	return append(args, open...)
}

// enqueued reads acquire.lua's answer to w's request, sent at sent (err:
// Redis refused it): the fence of its grant, or its place (< 0).
func (a *attempt) enqueued(w *waiter, open []any, sent time.Time, reply int64, err error) (int64, error) {
	switch {
	case err == nil:
		if open != nil {
			a.l.books.confirm(w.session, sent, true, true)
		}
		return reply, nil
	case redis.HasErrorPrefix(err, scripts.ErrSessionGone):
		return 0, a.l.sessionGone(w)
	case redis.HasErrorPrefix(err, scripts.ErrCapacity):
		// Refused before any change: like a bad argument, it never queued.
		a.l.books.drop(w)
		in := append(strings.Fields(strings.TrimPrefix(err.Error(), scripts.ErrCapacity)), "", "")
		return 0, fmt.Errorf("%w: %s %s is in use with %s, not %s", ErrInvalid, w.ref.kind.name, quoteName(w.ref.name),
			capacityText(in[0], in[1]), capacityText(strconv.Itoa(a.req.capacity), strconv.Itoa(a.req.limit)))
	}
	// Refused: withdraw the token, in case part of the script ran.
	return 0, a.fail(w, err, true)
}

// fateOf asks Redis what became of w's request, whose answer was lost
// (cause): the fence of its grant, its place (< 0), or 0 if it had not
// reached Redis, and then never will (recover.lua); errSessionGone if it
// did, in a session Redis no longer has. If Redis cannot be asked either,
// w is withdrawn for good in the background and the call ends with cause.
func (a *attempt) fateOf(ctx context.Context, w *waiter, mode requestMode, cause error) (int64, error) {
	args := w.ref.call(w.tokenArg, mode.arg(), a.l.refs.leaseMs)
	ticket := w.session.count.ticket(a.l.books.isOpen(w.session))
	reply, err := w.ref.kind.scripts.Recover.run(ctx, a.l.batch, args, retried).Int64()
	switch {
	case err == nil:
		if reply == 0 {
			w.session.count.add(ticket) // recover.lua counts a withdrawal
		}
		return reply, nil
	case redis.HasErrorPrefix(err, scripts.ErrSessionGone):
		return 0, a.l.sessionGone(w)
	case redis.HasErrorPrefix(err, scripts.ErrWaitersFirst):
		return 0, errQueuedFirst
	}
	return 0, a.fail(w, cause, true)
}

// sessionGone forgets w, whose request found its session gone in Redis,
// ends the session here, and returns errSessionGone: the call starts again
// in a new one.
func (l *Locker) sessionGone(w *waiter) error {
	l.books.drop(w)
	l.loseSession(w.session)
	return errSessionGone
}

// capacityText says a capacity and group limit ("0": none).
func capacityText(capacity, limit string) string {
	if limit == "" || limit == "0" {
		return "capacity " + capacity + " and no group limit"
	}
	return "capacity " + capacity + " and group limit " + limit
}
