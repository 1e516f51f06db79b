package fairlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// An attempt is one Acquire or TryAcquire call.
type attempt struct {
	l          *Locker
	req        request
	cfg        acquireConfig
	wait       bool
	mode       requestMode
	start      time.Time
	subscribed bool
}

// A requestMode says what acquire.lua does with a request it cannot grant
// at once.
type requestMode int

const (
	tryRequest   requestMode = iota // never queue it
	waitRequest                     // queue it
	countRequest                    // queue it, and count its place (paid only when someone listens for it)
	fastRequest                     // the fast path's request, which only recover.lua is asked about
)

// requestModes are the modes as script arguments, boxed once (scripts.go).
var requestModes = [...]any{tryRequest: modeTry, waitRequest: modeWait, countRequest: modeCount, fastRequest: modeFast}

// arg is m as a script argument.
func (m requestMode) arg() any { return requestModes[m] }

// errSessionGone means Redis no longer has the session a call ran in.
var errSessionGone = errors.New("fairlock: session gone")

// errGrantExpired means a grant ended before its waiter could take it.
var errGrantExpired = errors.New("fairlock: grant expired unclaimed")

// acquire serves every kind of lock: req says which, and what it asks for.
func (l *Locker) acquire(ctx context.Context, req request, wait bool, opts []AcquireOption) (*Lease, error) {
	a := &attempt{l: l, req: req, wait: wait, mode: tryRequest, start: time.Now()}
	if err := a.configure(opts); err != nil {
		return nil, err
	}
	if err := l.enterAcquire(ctx, req.ref.name); err != nil {
		return nil, err
	}
	defer l.calls.Done()
	return a.run(ctx)
}

// enterAcquire counts in an Acquire of the lock called name, once its
// options were checked: unless ctx ended, the Locker is closed, or Redis
// fails its first check. The caller calls l.calls.Done when it returns.
func (l *Locker) enterAcquire(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !l.books.enter(&l.calls) {
		return ErrClosed
	}
	if err := l.checks.ensure(ctx, l.client, &l.cfg); err != nil {
		l.calls.Done()
		return failed("acquire", name, err)
	}
	return nil
}

// configure reads the call's options and checks them.
func (a *attempt) configure(opts []AcquireOption) error {
	for _, opt := range opts {
		if opt == nil {
			return fmt.Errorf("%w: nil acquire option", ErrInvalid)
		}
		opt(&a.cfg)
	}
	kd := a.req.ref.kind
	switch c := &a.cfg; {
	case len(c.metadata) > MaxMetadataLen:
		return fmt.Errorf("%w: metadata of %s is longer than MaxMetadataLen (%s)", ErrInvalid, byteSize(len(c.metadata)), byteSize(MaxMetadataLen))
	case c.hasGroup && !kd.groups:
		return fmt.Errorf("%w: a %s takes no WithGroup", ErrInvalid, kd.name)
	case c.hasGroup && (c.group == "" || len(c.group) > MaxGroupLen):
		return fmt.Errorf("%w: group name %s is empty or longer than MaxGroupLen (%d bytes)", ErrInvalid, quoteName(c.group), MaxGroupLen)
	case c.hasWeight && !c.hasGroup:
		return fmt.Errorf("%w: WithGroupWeight needs WithGroup", ErrInvalid)
	case c.hasWeight && (c.weight < 1 || c.weight > MaxGroupWeight):
		return fmt.Errorf("%w: group weight %d is outside 1..MaxGroupWeight (%d)", ErrInvalid, c.weight, MaxGroupWeight)
	case c.priority < 0 || c.priority > MaxPriority:
		return fmt.Errorf("%w: priority %d is outside 0..MaxPriority (%d)", ErrInvalid, c.priority, MaxPriority)
	case c.priority > 0 && !kd.priorities:
		return fmt.Errorf("%w: a %s takes no priority: its waiters are granted in arrival order", ErrInvalid, kd.name)
	}
	if a.wait {
		a.mode = waitRequest
		if a.cfg.onQueued != nil || a.cfg.onPosition != nil || a.l.cfg.wantsPositions() {
			a.mode = countRequest
		}
	}
	return nil
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
		w, open := a.l.books.newWaiter(a.req, &a.cfg, a.l.cfg.lane(a.cfg.priority), a.l.id, a.start)
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
			open = a.l.books.stillToOpen(w.session, open)
		}
		if err := a.subscribe(ctx, w); err != nil {
			return nil, err
		}
		a.l.books.listen(w)
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
			a.l.books.drop(w)
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

// fail ends the call with err: it withdraws w from Redis for good if the
// request may have reached it, or may still reach it, and reports the end.
func (a *attempt) fail(w *waiter, err error, inRedis bool) error {
	if inRedis {
		a.l.leave(w, err, true)
		return err
	}
	a.l.books.drop(w)
	e := w.event(EventCancelled)
	e.Wait, e.Err = time.Since(a.start), err
	a.l.cfg.observe(e)
	return err
}

// queued reports w's place and puts it under the heartbeat's care.
func (a *attempt) queued(w *waiter, position int) {
	l := a.l
	l.books.queued(w, position)
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

// ctxError makes err match ctx.Err() when the context ended, whatever the
// Redis client reported (often an I/O timeout).
func ctxError(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}
