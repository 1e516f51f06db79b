package fairlock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// The fast path takes a free mutex that nobody waits for without
// acquire.lua, in one pipeline: EXISTS session session order, SET lock NX
// GET PX, and fence_fast.lua, which draws the grant's fence if the SET took
// the lock. A script call costs Redis more than the commands it runs, and
// on an uncontended lock that is the cost of every acquire; the fence
// needs one, to be drawn at least at the server's time (lib/fence.lua), and
// takes two keys and the token.
//
// The commands need not run as one: SET NX decides who gets the lock, and
// the fence is drawn after it while the lock is held, so fences follow
// grant order as they do in the scripts. EXISTS counts the session twice
// and the order set (every waiter, of any priority) once, so its reply
// says both whether the session lives (a grant in a dead session would be
// free for anyone) and whether waiters are queued (a waiter queued after
// it arrived after this call). When the lock was free with waiters queued
// (its holder died or expired), it is handed to them at once (cancel.lua):
// the fast path never jumps the queue. GET tells a SET that found this
// call's own token (a pipeline go-redis sent again) from one that found
// another holder.

// Outcomes of the fast path.
const (
	fastGranted     = iota // the lock is ours
	fastHeld               // someone holds it
	fastQueued             // it was free with waiters queued, and is theirs now
	fastSessionGone        // Redis no longer has the session: start another
	fastMigrating          // a slot migration split the lock's keys: queue with the script, which waits for it
)

// fastAcquire runs the fast path for w, and returns the fence of a grant.
// Its errors leave w to be withdrawn by the caller: the SET may have run.
func (l *Locker) fastAcquire(ctx context.Context, w *waiter, open []any) (fence int64, outcome int, err error) {
	ref := w.ref
	defer ref.trying.Store(false)
	found, fence, took, err := l.fastSend(ctx, w, open)
	if redis.IsTryAgainError(err) {
		// Redis ran none of the commands over several keys; the SET,
		// which has one, may have taken the lock: it goes back.
		ref.markBusy(l.cfg.heartbeat())
		if took {
			if err := l.cancelToken(ctx, ref, w.session, w.token, false, false); err != nil {
				return 0, 0, err
			}
		}
		return 0, fastMigrating, nil
	}
	if err != nil {
		return 0, 0, err
	}
	if found < 2 || (took && fence == 0) {
		// The session is gone, or the grant was by the time its fence was
		// drawn (a call that found the session dead dropped it).
		if took {
			// Nobody counts a grant of a dead session as held; handing the
			// lock on at once only spares the next taker a look.
			l.cancelToken(ctx, ref, w.session, w.token, false, false) //nolint:errcheck // best effort, see above
		}
		return 0, fastSessionGone, nil
	}
	if !took {
		ref.markBusy(l.cfg.heartbeat())
		return 0, fastHeld, nil
	}
	if found == 3 {
		// Free but with waiters queued: theirs. cancel.lua hands the lock to
		// the first live one, or frees it if none is.
		ref.markBusy(l.cfg.heartbeat())
		return 0, fastQueued, l.cancelToken(ctx, ref, w.session, w.token, false, false)
	}
	return fence, fastGranted, nil
}

// fastSend sends the fast path's pipeline for w, opening its session if
// open says so, and reads its replies: what EXISTS found, the fence drawn
// (0 if none), and whether the SET took the lock.
func (l *Locker) fastSend(ctx context.Context, w *waiter, open []any) (found, fence int64, took bool, err error) {
	ref := w.ref
	skey := w.session.keys[0]
	p := l.client.Pipeline()
	if open != nil {
		// One transaction: the holders' key, a hash, takes two commands,
		// and must never be left without its TTL (scripts/lib/tokens.lua).
		p = l.client.TxPipeline()
		p.HSetNX(ctx, skey.(string), "", 1) // another request may have opened it, and counted since
		p.Do(ctx, "pexpire", skey, open[0])
		p.Do(ctx, "set", w.session.keys[1], open[2], "px", open[1])
	}
	if ref.fastSession != w.session {
		ref.fastSession, ref.fastExists = w.session, []any{"exists", skey, skey, ref.args[2]}
	}
	exists := p.Do(ctx, ref.fastExists...)
	ref.fastSet[2] = w.tokenArg
	// Never sent twice (see once): its caller asks recover.lua instead.
	taken := redis.NewCmd(ctx, ref.fastSet...)
	p.Process(ctx, onceCmd{taken}) //nolint:errcheck // read from taken
	ref.fastFence[5] = w.tokenArg
	drawn := redis.NewCmd(ctx, ref.fastFence...)
	p.Process(ctx, drawn) //nolint:errcheck // read from drawn
	p.Exec(ctx)           //nolint:errcheck // each command's own error is read below
	found, err = exists.Int64()
	holder, serr := taken.Text()
	took = serr == redis.Nil || (serr == nil && holder == w.token)
	if err == nil && serr != nil && serr != redis.Nil {
		err = serr
	}
	if err != nil {
		return found, 0, took, err
	}
	fence, err = drawn.Int64()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// A pipeline cannot fall back to EVAL: run it alone, which can.
		fence, err = fenceFast.run(ctx, l.client, []any{nil, nil, 2, ref.args[0], ref.args[3], w.tokenArg}, retried).Int64()
	}
	return found, fence, took, err
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
