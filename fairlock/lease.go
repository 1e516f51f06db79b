package fairlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// A Lease is a held lock, or a semaphore's or read-write lock's grant. It
// ends when released, or when lost: its session or record expired, it was
// ended by force, or Redis forgot it. Done and Err tell which.
//
// A holder learns of a loss from its own clock: its lease ends locally a
// margin (a tenth of the lease TTL) before Redis could let anyone else in,
// counted from the last renewal Redis answered. A process that is paused
// or starved for longer than that margin (GC, swap, SIGSTOP, a loaded
// machine) can still act after its lock passed on; only Fence, passed to
// the storage the lock guards, protects the resource then.
type Lease struct {
	locker   *Locker
	ref      *lockRef
	session  *session
	shared   bool // a read-write lock's reader
	permits  int
	group    string
	weight   int // its group's weight when granted
	token    string
	tokenArg any // token, boxed once (its waiter's)
	fence    int64
	hasMeta  bool // Redis has metadata under token to drop or keep; never changed
	queued   bool // it waited in the queue, so others likely wait behind it (Lease.release)
	// marked is set while Redis may mark the grant "u", not taken up yet
	// (session.go): it then lives by its session's waiters' key too.
	marked atomic.Bool

	mu          sync.Mutex
	done        chan struct{} // made by the first Done
	err         error         // nil while held
	recordUntil time.Time     // before it, Redis surely still has the record
	expiry      *time.Timer   // ends the lease at recordUntil, whatever the heartbeat is doing
	renewAt     time.Time     // when the heartbeat renews the record
	releasing   bool          // Release was sent: a lease found gone is no loss
	granted     time.Time     // when Acquire handed it out, for Event.Held; zero before
	ended       time.Time     // when it ended here, for Event.Held
}

// event starts an Event about ls.
func (ls *Lease) event(kind EventKind) Event {
	return Event{Kind: kind, Name: ls.ref.name, Lock: ls.ref.kind.lock, Shared: ls.shared, Permits: ls.permits, Group: ls.group, Weight: groupWeight(ls.group, ls.weight), Priority: tokenPriority(ls.token), Token: ls.token, Multi: multiOf(ls.token)}
}

// Name is the lock's name.
func (ls *Lease) Name() string { return ls.ref.name }

// Token identifies this grant: the value of a mutex's lock key in Redis, or
// the holder's member in a semaphore's or read-write lock's set of holders
// (followed by "#" and the permits it holds, when more than one).
func (ls *Lease) Token() string { return ls.token }

// Fence is this grant's fencing token. Fences of one lock name strictly
// increase over all grants, even across expiry of every key, a Redis that
// lost its data, and one that went back to an older state (a failover to
// a replica that missed the last grants, a restart from an older
// snapshot): each is the last one plus 1, or the Redis server's time in
// microseconds if that is more, so they grow as long as the server's clock
// does not go back across the loss.
// Pass it to the storage the lock guards, and have the storage reject
// writes with a fence older than the newest it has seen.
func (ls *Lease) Fence() int64 { return ls.fence }

// Done is closed when the lease ends, for any reason.
func (ls *Lease) Done() <-chan struct{} {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.done == nil {
		if ls.err != nil {
			return closedChan
		}
		ls.done = make(chan struct{})
	}
	return ls.done
}

// closedChan is the Done of a lease that ended before anyone asked.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Err is nil while the lease is held, ErrReleased after Release, and
// ErrLost if it was lost. It is exact when asked: a lease whose local
// deadline passed is lost here, even if the timer that ends it (and closes
// Done) runs late on a loaded machine.
func (ls *Lease) Err() error {
	ls.mu.Lock()
	err, recordEnd := ls.err, time.Time{}
	if ls.expiry != nil {
		recordEnd = ls.recordUntil.Add(-ls.locker.cfg.margin())
	}
	ls.mu.Unlock()
	if err != nil {
		return err
	}
	now := time.Now()
	if !recordEnd.IsZero() && now.After(recordEnd) {
		ls.lose()
	}
	ls.locker.endIfOverdue(ls.session, ls.marked.Load(), now)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.err
}

// Release frees the lock, or all of the lease's permits, and grants the
// waiters at the head of the queue that now fit. It returns ErrNotHeld if
// the lease was already released or lost, and then changes nothing in
// Redis. A reply lost on the way back is asked for once more. If Redis
// cannot be reached or refuses the call, the lease still ends here and
// Release returns the error; the Locker frees the lock within a heartbeat
// of Redis answering again.
//
// If Redis refuses to publish the grant notification (the ACL rule lacks
// the channel pattern), the hand-off is written all the same, and the next
// waiter learns of its grant at its next heartbeat. Release then returns
// an error that says so and matches ErrReleased, as well as Redis's error.
func (ls *Lease) Release(ctx context.Context) error {
	ls.mu.Lock()
	ended := ls.err != nil || ls.releasing
	ls.releasing = true
	ls.mu.Unlock()
	if ended {
		return ErrNotHeld
	}
	marked := ls.marked.Load()
	ticket := ls.session.count.ticket(true)
	n, err := ls.release(ctx, marked, ticket)
	if err != nil && !isRedisError(err) && ctx.Err() == nil {
		// The release may have run: a second one that finds nothing to
		// release is this one's success. The first then counted itself in
		// the session, and so does the Locker, or a rollback to before it
		// would go unseen and leave the lease's ghost holding the lock
		// (the state machine found one). Should the first have released
		// nothing (a forced release this Locker has not learned of yet),
		// the next renewal takes the count for a rollback and gives the
		// session up: its other leases are lost too, which is safe, in a
		// case that needs both an operator's release and a lost reply.
		if n, err = ls.release(ctx, marked, ticket); err == nil && n == 0 {
			ls.session.count.add(ticket)
		}
		if err == nil {
			n = 1
		}
	}
	if err == nil || notifyRefused(err) {
		ls.unmark() // the script dropped the mark
	}
	switch {
	case err != nil && notifyRefused(err):
		ls.end(ErrReleased, false)
		return fmt.Errorf("fairlock: release %s: the lock was handed to the next waiter, but Redis refused to notify it, so it learns of its grant at its next heartbeat (does the ACL rule lack the channel pattern?): %w; %w",
			quoteName(ls.ref.name), err, ErrReleased)
	case err != nil:
		// It may not have run (a lost connection, TRYAGAIN during a slot
		// migration): the heartbeat tries again until Redis answers.
		ls.end(ErrReleased, true)
		return failed("release", ls.ref.name, err)
	case n == 0:
		// Withdrawn as a vanished record is, for the same reason.
		ls.end(ErrLost, true)
		return ErrNotHeld
	}
	ls.end(ErrReleased, false)
	return nil
}

// release runs one release in Redis, and returns 1 if the lease held the
// lock, 0 if not; a release that freed it counts itself in the lease's
// session (session.count), as sent with ticket. A mutex lease that Redis
// most likely finds with nobody waiting (it did not wait in the queue
// itself, and no call of this Locker found the lock busy within a
// heartbeat) and that needs no more than its lock freed (no metadata or
// mark to drop) goes to
// release_fast.lua, which carries 4 of release.lua's 14 arguments: their
// transfer and Lua strings cost an uncontended cycle more than the
// release's commands (docs/design.md). When it finds waiters after all,
// release.lua hands the lock on, a round trip later.
func (ls *Lease) release(ctx context.Context, marked bool, ticket countTicket) (n int, err error) {
	defer func() {
		if n == 1 {
			ls.session.count.add(ticket)
		}
	}()
	ref := ls.ref
	if ref.kind.fast && !ls.queued && !ls.hasMeta && !marked && time.Now().UnixNano() > ref.busyUntil.Load() {
		// The holders key, the order set and the session's key, boxed once.
		args := []any{nil, nil, 3, ref.args[0], ref.args[2], ls.session.keys[0], ls.tokenArg}
		n, err := releaseFast.run(ctx, ls.locker.batch, args, once).Int()
		if err != nil || n >= 0 {
			return n, err
		}
		ref.markBusy(ls.locker.cfg.heartbeat())
	}
	return ref.kind.scripts.Release.run(ctx, ls.locker.batch, ref.call(ls.tokenArg, flag(ls.hasMeta), flag(marked)), once).Int()
}

// Extend makes the lease live at least ttl more in Redis, counted from the
// call; it never shortens it, so that an extension the network delays
// cannot cut a later one short. With auto-renew on, leases are long
// already; with it off, Extend is how a holder keeps its lease. It returns
// ErrNotHeld, extending nothing, if the lease was lost; the Locker then
// withdraws its token, so that a grant Redis still keeps for it passes on.
func (ls *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := checkTTL("extension", ttl); err != nil {
		return err
	}
	if ls.Err() != nil {
		return ErrNotHeld
	}
	sent := time.Now()
	held, err := ls.ref.kind.scripts.Extend.run(ctx, ls.locker.batch, ls.ref.call(ls.token, ttl.Milliseconds(), flag(ls.hasMeta), noArg), retried).Int()
	if err != nil {
		return failed("extend", ls.ref.name, err)
	}
	if held == 0 {
		// Withdrawn, not just ended: extend.lua answers 0 for a grant not
		// taken up yet whose waiters' key is gone, and leaves its record;
		// were the key to return, or a renewal to drop the grant's mark,
		// the grant would hold again with nobody holding it. The
		// withdrawal drops the record and marks the token dead for good.
		ls.end(ErrLost, true)
		return ErrNotHeld
	}
	ls.mu.Lock()
	ls.setRecordUntil(sent.Add(ttl))
	ls.mu.Unlock()
	return nil
}

// renewed records a heartbeat that renewed the lease's record.
func (ls *Lease) renewed(sent time.Time) {
	ls.mu.Lock()
	ls.setRecordUntil(sent.Add(ls.locker.cfg.recordTTL()))
	ls.renewAt = sent.Add(ls.locker.cfg.keepTTL() / 3)
	ls.mu.Unlock()
	ls.locker.cfg.observe(ls.event(EventRenewed))
}

// needsRenewal tells whether the heartbeat should renew the record now.
// From then on a timer watches the record's end: renewals of the record
// may fail while those of the session go through (a Redis at full memory
// refused them once), and the lease must end before Redis drops it.
func (ls *Lease) needsRenewal(now time.Time) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	due := ls.err == nil && !ls.releasing && ls.locker.cfg.autoRenew && !now.Before(ls.renewAt)
	if due && ls.expiry == nil {
		ls.watchRecord()
	}
	return due
}

// lose ends the lease as lost, unless it is being released: then a lease
// found gone is the release's own doing. Redis may hold it still (its
// local deadline came first, or a renewal took up a grant that had died
// meanwhile): while its session lives, the Locker withdraws it.
func (ls *Lease) lose() {
	ls.mu.Lock()
	releasing := ls.releasing
	ls.mu.Unlock()
	if !releasing {
		ls.end(ErrLost, true)
	}
}

// vanished ends a lease whose record Redis no longer has. The Locker
// withdraws the token all the same: its metadata may still be there, and
// the withdrawal counts itself in the session (session.count), so that
// if Redis rolls back to a state that still has the record (an operator's
// ForceRelease lost in a failover), the next renewal finds the loss and
// gives the session up, rather than leave the record a holder nobody has.
func (ls *Lease) vanished() {
	ls.mu.Lock()
	releasing := ls.releasing
	ls.mu.Unlock()
	if !releasing {
		ls.end(ErrLost, true)
	}
}

// setRecordUntil moves the local end of the record, only later, as every
// record write only lengthens it. The lease is lost then unless renewed
// before: a heartbeat stuck on a slow reply cannot delay that. A record
// that ends before the session could (auto-renew off) is watched at once;
// a long one (auto-renew) from when its renewal is due (needsRenewal),
// which leaves two thirds of its TTL to spare. ls.mu is held.
func (ls *Lease) setRecordUntil(d time.Time) {
	if !d.After(ls.recordUntil) {
		return
	}
	ls.recordUntil = d
	if ls.expiry != nil || time.Until(d) < ls.locker.cfg.leaseTTL {
		ls.watchRecord()
	}
}

// watchRecord ends the lease a margin before its record's local end.
// ls.mu is held.
func (ls *Lease) watchRecord() {
	ls.expiry = resetTimer(ls.expiry, ls.recordUntil.Add(-ls.locker.cfg.margin()), ls.lose)
}

// unmark records that Redis no longer marks the grant as not taken up.
func (ls *Lease) unmark() {
	if ls.marked.Load() {
		ls.locker.books.unmark(ls)
	}
}

// end closes the lease once, with err as its reason. If withdraw is set,
// Redis may still hold it: the Locker frees it once Redis answers.
func (ls *Lease) end(err error, withdraw bool) {
	ls.mu.Lock()
	if ls.err != nil {
		ls.mu.Unlock()
		return
	}
	ls.err, ls.ended = err, time.Now()
	granted, ended := ls.granted, ls.ended
	if ls.done != nil {
		close(ls.done)
	}
	if ls.expiry != nil {
		ls.expiry.Stop()
	}
	ls.mu.Unlock()

	l := ls.locker
	l.books.leaseEnded(ls, withdraw)
	if granted.IsZero() {
		return // Acquire gave it up before handing it out, and reports that itself
	}
	kind := EventReleased
	if err == ErrLost {
		kind = EventLost
	}
	e := ls.event(kind)
	e.Fence, e.Held, e.Err = ls.fence, ended.Sub(granted), err
	l.cfg.observe(e)
}

// held is what do needs of a lease: a Lease, or a MultiLease.
type held interface {
	Done() <-chan struct{}
	Err() error
	Release(ctx context.Context) error
}

// do runs fn while holding the lease acquire returns, then releases it, on
// every way out of fn, a panic included (the panic goes on after the
// release). fn's context is cancelled, with cause ErrLost, if the lease is
// lost; then the error matches ErrLost, joined with fn's own error.
func do[L held](ctx context.Context, releaseWithin time.Duration, fn func(ctx context.Context) error, acquire func() (L, error)) (err error) {
	if fn == nil {
		return fmt.Errorf("%w: nil function", ErrInvalid)
	}
	lease, err := acquire()
	if err != nil {
		return err
	}
	fnCtx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-lease.Done():
			cancel(ErrLost)
		case <-fnCtx.Done():
		}
	}()
	var fnErr error
	defer func() {
		cancel(nil)
		relCtx, relCancel := context.WithTimeout(context.WithoutCancel(ctx), releaseWithin)
		defer relCancel()
		relErr := lease.Release(relCtx)
		if errors.Is(lease.Err(), ErrLost) {
			err = errors.Join(fnErr, ErrLost)
			return
		}
		err = errors.Join(fnErr, relErr)
	}()
	fnErr = fn(fnCtx)
	return nil
}
