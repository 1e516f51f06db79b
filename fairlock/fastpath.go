package fairlock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// The fast path takes a free lock that nobody waits for without a script:
// EXISTS queue, SET lock NX PX, INCR fence and PEXPIRE fence NX, in one
// pipeline. A script call
// costs Redis more than the three commands it runs (measured on a 2-core
// VM: about 2.2 µs against 0.6 µs), and on an uncontended lock that is the
// cost of every acquire.
//
// The three commands need not run as one: SET NX decides who gets the
// lock, and the fence is drawn after it while the lock is held, so fences
// follow grant order as they do in the scripts. The queue is read first:
// a waiter queued after that read arrived after this call. When the read
// found waiters and the SET still took the lock (its holder expired with
// nobody releasing), the lock is handed to them at once (cancel.lua), so
// the fast path never jumps the queue. INCR on a missing fence key starts
// it at 1, with no TTL: the PEXPIRE NX gives it one in the same round trip,
// so that a crash before the next call leaves no key without a TTL, and
// fenceSeedFloor makes the next grant seed it from the clock
// (lib/fence.lua), which the fast path asks for itself.

// fenceSeedFloor mirrors lib/fence.lua: fences below it were not seeded
// from the server's clock, in µs since 1970, which passed 10^12 in 1970.
const fenceSeedFloor = 1_000_000_000_000

// fenceTTLMs mirrors lib/fence.lua: the fence key lives a day, and is
// seeded anew from the clock after.
const fenceTTLMs = 86_400_000

// Outcomes of the fast path.
const (
	fastGranted = iota // the lock is ours
	fastHeld           // someone holds it
	fastQueued         // it was free with entries queued, and is theirs now (they may all be dead: ask the script)
)

// fastAcquire runs the fast path for w and returns the fence of a grant.
// Its errors leave w to be withdrawn by the caller: the SET may have run.
func (l *Locker) fastAcquire(ctx context.Context, w *waiter) (fence int64, outcome int, err error) {
	defer w.ref.trying.Store(false)
	p := l.client.Pipeline()
	queued := p.Do(ctx, w.ref.fastArgs[0]...)
	// GET tells a retried SET (go-redis sends it again after a lost reply)
	// that found this call's own token from one that found another holder.
	set := p.Do(ctx, "set", w.ref.args[0], w.token, "nx", "get", "px", l.leaseMs)
	incr := p.Do(ctx, w.ref.fastArgs[1]...)
	p.Do(ctx, w.ref.fastArgs[2]...)
	p.Exec(ctx) //nolint:errcheck // each command's own error is read below
	inQueue, err := queued.Int64()
	if err == nil {
		fence, err = incr.Int64()
	}
	holder, serr := set.Text()
	took := serr == redis.Nil || (serr == nil && holder == w.token)
	if err == nil && serr != nil && serr != redis.Nil {
		err = serr
	}
	if err != nil {
		return 0, 0, err
	}
	if fence < fenceSeedFloor {
		// A new fence key, or one not seeded yet: seed it, and draw this
		// grant's fence after the seed. It also gives the key its TTL.
		if fence, err = seedScript.run(ctx, l.client, w.ref, w.ref.call()).Int64(); err != nil {
			return 0, 0, err
		}
	}
	if took && inQueue == 0 {
		return fence, fastGranted, nil
	}
	w.ref.markBusy(l.heartbeat)
	if !took {
		return 0, fastHeld, nil
	}
	// Free but with entries queued: theirs. cancel.lua hands it to the first
	// live one, or frees it if none is.
	err = mutexScripts.cancel.run(ctx, l.client, w.ref, w.ref.call(w.token, w.ref.notify[0], w.ref.notify[1])).Err()
	return 0, fastQueued, err
}

// markBusy skips the fast path on the lock for d.
func (r *lockRef) markBusy(d time.Duration) {
	r.busyUntil.Store(time.Now().Add(d).UnixNano())
}

// fastTry tells whether this call may try the fast path on the lock, and
// if so claims it until fastAcquire returns. It is not worth a try, since the
// lock most likely is taken and the queue's path would then cost a second
// round trip, and a caller behind it would lose its place in arrival
// order to a release in between:
//   - when this Locker found the lock busy within the last heartbeat;
//   - when this Locker waits for it or holds it;
//   - while another call of this Locker tries it (a burst of calls).
func (l *Locker) fastTry(r *lockRef) bool {
	if time.Now().UnixNano() <= r.busyUntil.Load() || !r.trying.CompareAndSwap(false, true) {
		return false
	}
	l.mu.Lock()
	_, busyHere := l.locks[r.key()]
	l.mu.Unlock()
	if busyHere {
		r.trying.Store(false)
	}
	return !busyHere
}
