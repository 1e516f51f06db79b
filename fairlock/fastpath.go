package fairlock

import (
	"context"
	"slices"
	"time"
)

// The fast path takes a free mutex that nobody waits for without
// acquire.lua, in one call of acquire_fast.lua, which opens the caller's
// session if the call is its first, takes the lock with SET NX PX, and
// draws the grant's fence. A script's cost to Redis grows with its keys,
// arguments and Lua, and on an uncontended lock that is the cost of every
// acquire; the fast path's takes what it uses. When the lock was free
// with waiters queued (its holder died or expired), it is handed to them
// at once (cancel.lua): the fast path never jumps the queue.

// Outcomes of the fast path.
const (
	fastGranted     = iota // the lock is ours
	fastHeld               // someone holds it
	fastQueued             // it was free with waiters queued, and is theirs now
	fastSessionGone        // Redis no longer has the session: start another
)

// fastAcquire runs the fast path for w, opening its session if open says
// so, and returns the fence of a grant. Its errors leave w to be
// withdrawn by the caller: the script may have run.
func (l *Locker) fastAcquire(ctx context.Context, w *waiter, open []any) (fence int64, outcome int, err error) {
	ref := w.ref
	defer ref.trying.Store(false)
	args := []any{nil, nil, 4, ref.args[0], ref.args[3], ref.args[2], w.session.keys[0], w.tokenArg, l.refs.recordMs}
	if open != nil {
		args = slices.Insert(args, 7, w.session.keys[1])
		args[2] = 5
		args = append(args, open...)
	}
	// Never sent twice (see once): its caller asks recover.lua instead.
	fence, err = acquireFast.run(ctx, l.batch, args, once).Int64()
	switch {
	case err != nil:
		return 0, 0, err
	case fence == -1:
		return 0, fastSessionGone, nil
	case fence == 0:
		ref.markBusy(l.cfg.heartbeat())
		return 0, fastHeld, nil
	case fence == -2:
		// cancel.lua hands the lock to the first live waiter, or frees it
		// if none is.
		ref.markBusy(l.cfg.heartbeat())
		return 0, fastQueued, l.cancelToken(ctx, ref, w.session, w.token, false, false)
	}
	return fence, fastGranted, nil
}

// fastTry tells whether this call may try the fast path on the lock, and
// if so claims it until fastAcquire returns. It is not worth a try, since
// the lock most likely is taken and the queue's path would then cost a
// second round trip, and a caller behind it would lose its place in arrival
// order to a release in between:
//   - when this Locker found the lock busy within the last heartbeat;
//   - when this Locker waits for it or holds it;
//   - while another call of this Locker tries it (a burst of calls).
func (l *Locker) fastTry(r *lockRef) bool {
	if !r.kind.fast || time.Now().UnixNano() <= r.busyUntil.Load() || !r.trying.CompareAndSwap(false, true) {
		return false
	}
	busyHere := l.books.has(r)
	if busyHere {
		r.trying.Store(false)
	}
	return !busyHere
}
