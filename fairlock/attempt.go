package fairlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// An attempt is one Acquire or TryAcquire call.
type attempt struct {
	l          *Locker
	req        request
	cfg        acquireConfig
	wait       bool
	mode       any // acquire.lua's mode
	start      time.Time
	subscribed bool
}

// errSessionGone means Redis no longer has the session a call ran in.
var errSessionGone = errors.New("fairlock: session gone")

// errGrantExpired means a grant ended before its waiter could take it.
var errGrantExpired = errors.New("fairlock: grant expired unclaimed")

// errWithdrawn means a request whose answer was lost had not reached Redis,
// and its token is withdrawn for good: the call starts again.
var errWithdrawn = errors.New("fairlock: request withdrawn after its answer was lost")

// errQueuedFirst means the fast path took a lock whose queue has waiters,
// who may have come first: it hands the lock to them and queues.
var errQueuedFirst = errors.New("fairlock: waiters queued")

// acquire serves every kind of lock: req says which, and what it asks for.
func (l *Locker) acquire(ctx context.Context, req request, wait bool, opts []AcquireOption) (*Lease, error) {
	a := &attempt{l: l, req: req, wait: wait, mode: modeTry, start: time.Now()}
	if err := a.configure(opts); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !l.enter() {
		return nil, ErrClosed
	}
	defer l.calls.Done()
	if err := l.checks.ensure(ctx, l.client, &l.cfg); err != nil {
		return nil, failed("acquire", req.ref.name, err)
	}
	return a.run(ctx)
}

// configure reads the call's options and checks them.
func (a *attempt) configure(opts []AcquireOption) error {
	for _, opt := range opts {
		if opt != nil {
			opt(&a.cfg)
		}
	}
	switch c := &a.cfg; {
	case len(c.metadata) > MaxMetadataLen:
		return fmt.Errorf("%w: metadata of %s is longer than MaxMetadataLen (%s)", ErrInvalid, byteSize(len(c.metadata)), byteSize(MaxMetadataLen))
	case c.hasGroup && a.req.ref.kind != semaphoreKind:
		return fmt.Errorf("%w: only a semaphore takes WithGroup, not a %v", ErrInvalid, a.req.ref.kind.lock)
	case c.hasGroup && (c.group == "" || len(c.group) > MaxGroupLen):
		return fmt.Errorf("%w: group name %s is empty or longer than MaxGroupLen (%d bytes)", ErrInvalid, quoteName(c.group), MaxGroupLen)
	}
	if a.wait {
		a.mode = modeWait
		if a.cfg.onQueued != nil || a.cfg.onPosition != nil || a.l.cfg.wantsPositions() {
			a.mode = modeCount
		}
	}
	return nil
}

// enter counts a call in, unless the Locker is closed.
func (l *Locker) enter() bool {
	l.books.mu.Lock()
	defer l.books.mu.Unlock()
	if l.books.closed {
		return false
	}
	l.calls.Add(1)
	return true
}

// sessionRetries bounds how often one call starts a new session because
// Redis lost the one it ran in (a restart, a failover, FLUSHALL).
const sessionRetries = 3

func (a *attempt) run(ctx context.Context) (*Lease, error) {
	ref := a.req.ref
	// The fast path takes a mutex and writes no metadata: other calls take
	// the script.
	fast := a.cfg.metadata == "" && a.l.fastTry(ref)
	for lost := 0; ; {
		w, open := a.l.newWaiter(a)
		if fast {
			fast = false
			lease, done, err := a.tryFast(ctx, w, open)
			if done {
				return lease, err
			}
			if err == errSessionGone || err == errWithdrawn {
				lost++
				continue
			}
			open = a.l.stillToOpen(w.session, open)
		}
		if err := a.subscribe(ctx, w); err != nil {
			return nil, err
		}
		a.l.listen(w)
		reply, err := a.enqueue(ctx, w, open)
		switch {
		case err == errSessionGone || err == errWithdrawn:
			if lost++; lost > sessionRetries {
				return nil, failed("acquire", ref.name, err)
			}
			continue
		case err != nil:
			return nil, ctxError(ctx, failed("acquire", ref.name, err))
		case reply > 0:
			lease, err := a.l.grant(ctx, w, reply, false, false)
			if err != ErrPlaceLost {
				return lease, err
			}
			// Its session ended as it was granted: start again.
			if lost++; lost > sessionRetries {
				return nil, failed("acquire", ref.name, errSessionGone)
			}
			continue
		case reply == 0:
			ref.markBusy(a.l.cfg.heartbeat())
			a.l.drop(w)
			return nil, ErrNotAcquired
		}
		ref.markBusy(a.l.cfg.heartbeat())
		a.queued(w, int(-reply))
		lease, err := a.await(ctx, w)
		if err != errGrantExpired && err != ErrPlaceLost {
			return lease, err
		}
	}
}

// subscribe subscribes a call that waits to its lock's grant messages
// before its first enqueue, so that no message can come before the
// listener.
func (a *attempt) subscribe(ctx context.Context, w *waiter) error {
	if !a.wait || a.subscribed {
		return nil
	}
	if err := a.l.notifier.subscribe(ctx, a.req.ref); err != nil {
		return a.fail(w, ctxError(ctx, fmt.Errorf("fairlock: subscribe: %w", err)), false)
	}
	a.subscribed = true
	return nil
}

// tryFast runs the fast path; done is false when the call goes on to the
// script (the lock is held, or it was free with waiters queued, whom the
// fast path handed it to).
func (a *attempt) tryFast(ctx context.Context, w *waiter, open []any) (lease *Lease, done bool, err error) {
	a.l.books.mu.Lock()
	w.sent = time.Now()
	a.l.books.mu.Unlock()
	fence, outcome, err := a.l.fastAcquire(ctx, w, open)
	if err != nil && !isRedisError(err) {
		// The answer was lost, maybe not the request: it took the lock, or
		// it is withdrawn now.
		fence, err = a.recover(ctx, w, modeFast, failed("acquire", w.ref.name, err))
		switch {
		case err == errSessionGone:
			return nil, false, err
		case err == errQueuedFirst:
			outcome, err = fastQueued, a.l.cancelToken(ctx, w.ref, w.token, false, false)
		case err != nil:
			return nil, true, ctxError(ctx, err)
		case fence <= 0:
			return nil, false, a.l.withdrawn(w, open)
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
		a.l.drop(w)
		a.l.loseSession(w.session)
		return nil, false, errSessionGone
	case outcome == fastGranted:
		if open != nil {
			a.l.confirm(w.session, w.sent, true, true)
		}
		lease, err := a.l.grant(ctx, w, fence, false, false)
		if err == ErrPlaceLost {
			return nil, false, errSessionGone
		}
		return lease, true, err
	}
	if open != nil {
		a.l.confirm(w.session, w.sent, true, true)
	}
	return nil, false, nil
}

// enqueue runs acquire.lua for w. It runs on the caller's goroutine: a
// goroutine aside, which would let a cancelled Acquire return while Redis
// stalls, costs a third of an uncontended acquire on a two-core machine.
// So a call already sent ends when go-redis returns (its read timeout, or
// the context's deadline with ContextTimeoutEnabled), and then leaves.
func (a *attempt) enqueue(ctx context.Context, w *waiter, open []any) (int64, error) {
	args := w.ref.call(w.tokenArg, a.mode, metaValue(w.meta), a.req.capacity, a.req.limit, w.group)
	args = append(args, open...)
	a.l.books.mu.Lock()
	w.sent = time.Now()
	a.l.books.mu.Unlock()
	reply, err := w.ref.kind.scripts.acquire.run(ctx, a.l.client, args, once).Int64()
	if err != nil && !isRedisError(err) {
		// The answer was lost, maybe not the request.
		if reply, err = a.recover(ctx, w, a.mode, err); err == nil && reply == 0 {
			return 0, a.l.withdrawn(w, open)
		}
		if err != nil {
			return 0, err
		}
	}
	switch {
	case err == nil:
		if open != nil {
			a.l.confirm(w.session, w.sent, true, true)
		}
		return reply, nil
	case redis.HasErrorPrefix(err, "FAIRLOCK_SESSION"):
		a.l.drop(w)
		a.l.loseSession(w.session)
		return 0, errSessionGone
	case redis.HasErrorPrefix(err, capacityRefused):
		// Refused before any change: like a bad argument, it never queued.
		a.l.drop(w)
		in := append(strings.Fields(strings.TrimPrefix(err.Error(), capacityRefused)), "", "")
		return 0, fmt.Errorf("%w: semaphore %s is in use with %s, not %s", ErrInvalid, quoteName(w.ref.name),
			capacityText(in[0], in[1]), capacityText(fmt.Sprint(a.req.capacity), fmt.Sprint(a.req.limit)))
	}
	// Refused: withdraw the token, in case part of the script ran.
	return 0, a.fail(w, err, true)
}

// withdrawn forgets w, whose request recover.lua withdrew before it reached
// Redis, and returns errWithdrawn. If that request was to open w's session
// (open), no party joins the session any more: the request may still come
// and open it, after a loss of Redis's data took the withdrawal's mark
// with it; the session then dies within its TTL, as nobody renews it.
func (l *Locker) withdrawn(w *waiter, open []any) error {
	l.books.mu.Lock()
	defer l.books.mu.Unlock()
	l.books.forget(w)
	w.session.left()
	if open != nil && l.books.current[w.session.scope] == w.session {
		delete(l.books.current, w.session.scope)
	}
	return errWithdrawn
}

// recover asks Redis what became of w's request, whose answer was lost
// (cause): the fence of its grant, its place (< 0), or 0 if it had not
// reached Redis, and then never will (recover.lua); errSessionGone if it
// did, in a session Redis no longer has. If Redis cannot be asked either,
// w is withdrawn for good in the background and the call ends with cause.
func (a *attempt) recover(ctx context.Context, w *waiter, mode any, cause error) (int64, error) {
	args := w.ref.call(w.tokenArg, mode, a.l.refs.leaseMs)
	reply, err := w.ref.kind.scripts.recover.run(ctx, a.l.client, args, retried).Int64()
	switch {
	case err == nil:
		return reply, nil
	case redis.HasErrorPrefix(err, "FAIRLOCK_SESSION"):
		a.l.drop(w)
		a.l.loseSession(w.session)
		return 0, errSessionGone
	case redis.HasErrorPrefix(err, "FAIRLOCK_QUEUED"):
		return 0, errQueuedFirst
	}
	return 0, a.fail(w, cause, true)
}

// capacityText says a capacity and group limit ("0": none).
func capacityText(capacity, limit string) string {
	if limit == "" || limit == "0" {
		return "capacity " + capacity + " and no group limit"
	}
	return "capacity " + capacity + " and group limit " + limit
}

// capacityRefused starts acquire.lua's error for a semaphore in use with
// another capacity or group limit.
const capacityRefused = "FAIRLOCK_CAPACITY"

// fail ends the call with err: it withdraws w from Redis for good if the
// request may have reached it, or may still reach it, and reports the end.
func (a *attempt) fail(w *waiter, err error, inRedis bool) error {
	if inRedis {
		a.l.leave(w, err, true)
		return err
	}
	a.l.drop(w)
	e := w.event(EventCancelled)
	e.Wait, e.Err = time.Since(a.start), err
	a.l.cfg.observe(e)
	return err
}

// queued reports w's place and puts it under the heartbeat's care.
func (a *attempt) queued(w *waiter, position int) {
	l := a.l
	l.books.mu.Lock()
	w.position = position
	ll := l.books.local(w.ref, a.req.capacity, a.req.limit)
	if ll.waiters == nil {
		ll.waiters = map[*waiter]struct{}{}
	}
	ll.waiters[w] = struct{}{}
	l.books.mu.Unlock()
	w.queued = true
	e := w.event(EventEnqueued)
	e.Position = position
	l.cfg.observe(e)
	if a.cfg.onQueued != nil {
		a.cfg.onQueued(position)
	}
	if w.onPosition != nil {
		w.onPosition(position)
	}
}

// await waits for w's grant. ErrPlaceLost and errGrantExpired mean it
// lost its place and queues again.
func (a *attempt) await(ctx context.Context, w *waiter) (*Lease, error) {
	select {
	case fence := <-w.news:
		if fence > 0 {
			return a.accept(ctx, w, fence)
		}
		// Redis may still hold the old entry if only the heartbeat's
		// replies were lost: withdraw it by token. A caller that gave up
		// meanwhile is not queued again.
		if err := ctx.Err(); err != nil {
			a.l.leave(w, err, false)
			return nil, ctxError(ctx, err)
		}
		a.l.leave(w, ErrPlaceLost, false)
		return nil, ErrPlaceLost
	case <-ctx.Done():
		a.l.leave(w, ctx.Err(), false)
		return nil, ctxError(ctx, ctx.Err())
	case <-a.l.closing:
		a.l.leave(w, ErrClosed, false)
		return nil, ErrClosed
	}
}

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
	l.books.mu.Lock()
	_, live := l.books.sessions[w.session]
	until := w.session.deadline(true)
	if record := w.sent.Add(l.cfg.recordTTL() - l.cfg.margin()); record.Before(until) {
		until = record
	}
	l.books.mu.Unlock()
	if !live || time.Until(until) >= l.cfg.heartbeat() {
		// Trusted, or over already: grant gives back a grant of a session
		// that ended here.
		return l.grant(ctx, w, fence, true, true)
	}
	sent := time.Now()
	args := w.ref.call(w.token, l.cfg.recordTTL().Milliseconds(), flag(w.meta != ""), l.cfg.leaseTTL.Milliseconds())
	held, err := w.ref.kind.scripts.extend.run(ctx, l.client, args, retried).Int()
	if err != nil {
		l.leave(w, ctxError(ctx, err), false)
		return nil, ctxError(ctx, failed("acquire", w.ref.name, err))
	}
	if held == 0 {
		l.drop(w)
		e := w.event(EventCancelled)
		e.Wait, e.Queued, e.Err = time.Since(w.start), true, fmt.Errorf("%w: %w", ErrPlaceLost, errGrantExpired)
		l.cfg.observe(e)
		return nil, errGrantExpired
	}
	l.confirm(w.session, sent, true, false)
	l.books.mu.Lock()
	w.sent = sent
	l.books.mu.Unlock()
	return l.grant(ctx, w, fence, true, false)
}

// ctxError makes err match ctx.Err() when the context ended, whatever the
// Redis client reported (often an I/O timeout).
func ctxError(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}

// newWaiter makes a waiter under a fresh token of its session; listen puts
// it on the books when it is to queue. open is what its first request
// sends to open the session, nil if it is open.
func (l *Locker) newWaiter(a *attempt) (w *waiter, open []any) {
	b := &l.books
	b.mu.Lock()
	defer b.mu.Unlock()
	s := l.sessionFor(a.req.ref)
	b.seq++
	w = &waiter{
		ref:        a.req.ref,
		req:        a.req,
		session:    s,
		token:      s.id + ":" + strconv.FormatUint(b.seq, 36) + a.req.suffix,
		group:      a.cfg.group,
		meta:       a.cfg.metadata,
		start:      a.start,
		onPosition: a.cfg.onPosition,
	}
	w.tokenArg = w.token
	return w, l.openArgs(s)
}

// listen puts w where grant messages, the heartbeat and its session's end
// find it, before the request that queues it is sent.
func (l *Locker) listen(w *waiter) {
	b := &l.books
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.news == nil {
		w.news = make(chan int64, 1)
		b.waiters[w.token] = w
		w.session.waiters[w] = struct{}{}
	}
}

// stillToOpen is open, or nil if a call opened s meanwhile.
func (l *Locker) stillToOpen(s *session, open []any) []any {
	l.books.mu.Lock()
	defer l.books.mu.Unlock()
	if s.opened {
		return nil
	}
	return open
}

// grant makes the Lease for w's granted token and puts it under the
// heartbeat's care. If the Locker was closed meanwhile, the lock is
// released at once rather than left to a holder nobody will return it to.
// queued says whether the token had been reported by EventEnqueued, marked
// whether the grant was made on w's behalf and not taken up yet.
func (l *Locker) grant(ctx context.Context, w *waiter, fence int64, queued, marked bool) (*Lease, error) {
	s, closed, live := l.newLease(w, fence, marked)
	// A grant given up here ends as EventCancelled; the lease, never handed
	// out, reports no end of its own (see Lease.end).
	switch {
	case closed:
		return nil, l.giveUp(ctx, s, w, queued, ErrClosed)
	case !live:
		// Its session ended, or outlived its local deadline, meanwhile:
		// nobody here counts the grant as held, and Redis may hold it for
		// as long as requests whose answers never came renew the session.
		// It goes back at once, and the call queues again.
		return nil, l.giveUp(ctx, s, w, queued, ErrPlaceLost)
	}
	if l.cfg.replicas > 0 {
		if err := l.awaitReplicas(ctx, s); err != nil {
			return nil, l.giveUp(ctx, s, w, queued, ctxError(ctx, failed("acquire", w.ref.name, err)))
		}
	}
	s.mu.Lock()
	s.granted = time.Now()
	lost := s.err != nil
	s.mu.Unlock()
	e := w.event(EventGranted)
	e.Fence, e.Wait, e.Queued = fence, time.Since(w.start), queued
	l.cfg.observe(e)
	if lost {
		// It ended before it was handed out, and Lease.end did not report
		// that: report it now, so every grant has an end.
		e := s.event(EventLost)
		e.Fence, e.Err = fence, ErrLost
		l.cfg.observe(e)
	}
	return s, nil
}

// newLease turns w into a Lease and puts it on the books, unless the
// Locker closed or w's session ended meanwhile.
func (l *Locker) newLease(w *waiter, fence int64, marked bool) (s *Lease, closed, live bool) {
	s = &Lease{
		locker:   l,
		ref:      w.ref,
		session:  w.session,
		shared:   w.req.shared,
		permits:  w.req.permits,
		group:    w.group,
		token:    w.token,
		tokenArg: w.tokenArg,
		fence:    fence,
		hasMeta:  w.meta != "",
	}
	s.marked.Store(marked)
	b := &l.books
	b.mu.Lock()
	closed = b.closed
	_, live = b.sessions[w.session]
	live = live && time.Now().Before(w.session.deadline(marked))
	until := w.sent.Add(l.cfg.recordTTL())
	b.forget(w)
	if marked {
		// Its mark goes at the next renewal: taken up if it is held here,
		// or cleared.
		w.session.marks[s.token] = nil
	}
	if !closed && live {
		ll := b.local(w.ref, w.req.capacity, w.req.limit)
		if ll.leases == nil {
			ll.leases = map[*Lease]struct{}{}
		}
		ll.leases[s] = struct{}{}
		w.session.leases[s] = struct{}{}
		if marked {
			w.session.marks[s.token] = s
		}
	}
	b.mu.Unlock()
	s.mu.Lock()
	s.setRecordUntil(until)
	s.renewAt = time.Now().Add(l.cfg.keepTTL() / 3)
	s.mu.Unlock()
	return s, closed, live
}

// giveUp releases a grant that Acquire does not hand out, waiting for that
// at most a heartbeat, and reports the call's end with err.
func (l *Locker) giveUp(ctx context.Context, s *Lease, w *waiter, queued bool, err error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.heartbeat())
	defer cancel()
	s.Release(ctx) //nolint:errcheck // best effort: the Locker retries a release Redis did not answer
	e := w.event(EventCancelled)
	e.Wait, e.Queued, e.Err = time.Since(w.start), queued, err
	l.cfg.observe(e)
	return err
}
