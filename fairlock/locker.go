package fairlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// A Locker grants fair locks on one Redis (or Redis Cluster) to the
// goroutines of a process. It is safe for concurrent use; one per process
// is the normal use. All its waiters and leases share one pub/sub
// connection and one heartbeat timer.
type Locker struct {
	client       redis.UniversalClient
	cfg          config
	id           string
	sharded      bool          // on Redis Cluster: notify with SPUBLISH, see notify.go
	notifyPrefix string        // off Cluster: + a Locker id, that Locker's channel
	heartbeat    time.Duration // period of the heartbeat timer
	leaseMs      any           // the TTLs as script arguments, boxed once
	waiterMs     any

	mu      sync.Mutex
	seq     uint64
	locks   map[refKey]*localLock // what the heartbeat covers
	waiters map[string]*waiter    // by token: where grant messages go
	refs    map[refKey]*lockRef   // at most refCacheSize
	pending map[string]withdrawal // by token: withdrawals to retry
	closed  bool
	calls   sync.WaitGroup // Acquire and TryAcquire calls under way

	subMu sync.Mutex
	subs  map[string]*subscription // by channel
	conns map[string]*redis.PubSub // by shard primary's address ("" off Cluster)

	closing chan struct{} // closed by Close: waiters give up
	stopped chan struct{} // closed by Close when no call is left: background goroutines stop
	kick    chan struct{} // asks for a heartbeat now
	bg      sync.WaitGroup
}

// localLock is what this Locker has on one lock.
type localLock struct {
	ref     *lockRef
	waiters map[*waiter]struct{} // queued in Redis, to keep alive; nil until one is
	// leases are held by this Locker, to renew. A mutex has at most one
	// here, and most semaphores few: a slice on one, an array inside the
	// record, costs the uncontended acquire no allocation.
	leases []*Lease
	one    [1]*Lease
	// capacity is a semaphore's, as its latest waiter or lease here asked:
	// the heartbeat puts it back if Redis lost it. "" for a mutex.
	capacity any
}

// A request is what one Acquire call asks for.
type request struct {
	ref     *lockRef
	kind    LockKind
	permits int // as events report them: n for a semaphore, else 1
	// capacity is the semaphore's capacity as a script argument, nil for a
	// mutex, and suffix what the token carries after it: "#" and the
	// permits Redis counts (a writer's are all of them), "" for one.
	capacity any
	suffix   string
}

// mutexRequest asks for the mutex called name.
func (l *Locker) mutexRequest(name string) request {
	return request{ref: l.ref(spaceMutex, name), kind: LockMutex, permits: 1}
}

type waiter struct {
	ref   *lockRef
	req   request
	token string    // guarded by Locker.mu: a waiter that lost its place queues anew with a new token
	since time.Time // guarded by Locker.mu: when the request that set its Redis deadline was sent
	start time.Time // when its Acquire call began, for Event.Wait
	meta  string    // its Acquire's WithMetadata, "" if none
	// queued is set once EventEnqueued reported it, so that the event that
	// reports it leaving says so (Event.Queued). Only its Acquire touches it.
	queued bool
	// position is its place as last reported (guarded by Locker.mu), and
	// onPosition hears of changes (OnPosition).
	position   int
	onPosition func(position int)

	granted chan int64    // the fence, once granted
	evicted chan struct{} // it lost its place in the queue
}

// New returns a Locker that keeps its locks on client. It checks the
// options but does not contact Redis.
func New(client redis.UniversalClient, opts ...Option) (*Locker, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil Redis client", ErrInvalid)
	}
	cfg := defaultConfig()
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil option", ErrInvalid)
		}
		if err := opt(&cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	l := &Locker{
		client:    client,
		cfg:       cfg,
		id:        uuid.NewString(),
		heartbeat: heartbeatOf(cfg.leaseTTL, cfg.waiterTTL),
		leaseMs:   cfg.leaseTTL.Milliseconds(),
		waiterMs:  cfg.waiterTTL.Milliseconds(),
		locks:     map[refKey]*localLock{},
		waiters:   map[string]*waiter{},
		refs:      map[refKey]*lockRef{},
		pending:   map[string]withdrawal{},
		closing:   make(chan struct{}),
		stopped:   make(chan struct{}),
		kick:      make(chan struct{}, 1),
		subs:      map[string]*subscription{},
		conns:     map[string]*redis.PubSub{},
	}
	_, l.sharded = client.(*redis.ClusterClient)
	l.notifyPrefix = "notify:"
	if cfg.prefix != "" {
		l.notifyPrefix = cfg.prefix + ":notify:"
	}
	l.bg.Add(1)
	go l.heartbeatLoop()
	return l, nil
}

// Heartbeat is the period at which the Locker keeps its waiters alive,
// renews its leases and re-checks for grants whose notification was lost:
// a third of the smaller of the lease and waiter TTLs.
func (l *Locker) Heartbeat() time.Duration { return l.heartbeat }

// Acquire waits, in strict FIFO order among live waiters, until it holds the
// lock called name, and returns the lease. If ctx ends first, the error
// matches errors.Is(err, ctx.Err()) and the waiter has left the queue; a
// grant that raced with the cancellation is released. Acquire is not
// reentrant: a second Acquire of a lock this Locker holds waits for it.
func (l *Locker) Acquire(ctx context.Context, name string, opts ...AcquireOption) (*Lease, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	return l.acquire(ctx, l.mutexRequest(name), true, opts)
}

// TryAcquire takes the lock only if it is free and nobody waits for it, and
// returns ErrNotAcquired otherwise. It never waits and never jumps the queue.
func (l *Locker) TryAcquire(ctx context.Context, name string, opts ...AcquireOption) (*Lease, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	return l.acquire(ctx, l.mutexRequest(name), false, opts)
}

// acquire serves every kind of lock: req says which, and what it asks for.
func (l *Locker) acquire(ctx context.Context, req request, wait bool, opts []AcquireOption) (*Lease, error) {
	var ac acquireConfig
	for _, opt := range opts {
		if opt != nil {
			opt(&ac)
		}
	}
	if len(ac.metadata) > MaxMetadataLen {
		return nil, fmt.Errorf("%w: metadata of %s is longer than MaxMetadataLen (%s)", ErrInvalid, byteSize(len(ac.metadata)), byteSize(MaxMetadataLen))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !l.enter() {
		return nil, ErrClosed
	}
	defer l.calls.Done()
	start := time.Now()
	ref, name := req.ref, req.ref.name
	mode := modeTry
	if wait {
		mode = modeWait
		if ac.onQueued != nil || ac.onPosition != nil || l.wantsPositions() {
			mode = modeCount
		}
	}
	// The fast path takes a mutex and writes no metadata: other calls take
	// the script.
	fast, subscribed := ref.space == spaceMutex && ac.metadata == "" && l.fastTry(ref), false
	for {
		w := l.newWaiter(req, start, ac.metadata)
		w.onPosition = ac.onPosition
		sent := time.Now()
		if fast {
			fast = false
			fence, outcome, err := l.fastAcquire(ctx, w)
			if err != nil {
				l.leave(w, ctxError(ctx, err))
				return nil, ctxError(ctx, fmt.Errorf("fairlock: acquire %s: %w", quoteName(name), err))
			}
			if outcome == fastGranted {
				l.forget(w)
				return l.grant(ctx, w, fence, sent.Add(l.cfg.leaseTTL), true, start, false)
			}
			if !wait && outcome == fastHeld {
				l.forget(w)
				return nil, ErrNotAcquired
			}
		}
		// Subscribed before the enqueue, so that no grant message can come
		// before the listener; the fast path needs none.
		if wait && !subscribed {
			if err := l.subscribe(ctx, ref); err != nil {
				// The fast path may have reached Redis already: this is the
				// call's end.
				l.forget(w)
				err = ctxError(ctx, fmt.Errorf("fairlock: subscribe: %w", err))
				e := w.event(EventCancelled)
				e.Wait, e.Err = time.Since(start), err
				l.observe(e)
				return nil, err
			}
			subscribed = true
		}
		sent = time.Now()
		reply, err := l.enqueue(ctx, w, mode)
		if err != nil {
			return nil, ctxError(ctx, fmt.Errorf("fairlock: acquire %s: %w", quoteName(name), err))
		}
		switch {
		case reply > 0:
			l.forget(w)
			return l.grant(ctx, w, reply, sent.Add(l.cfg.leaseTTL), true, start, false)
		case reply == 0:
			ref.markBusy(l.heartbeat)
			l.forget(w)
			return nil, ErrNotAcquired
		}
		ref.markBusy(l.heartbeat)
		position := int(-reply)
		l.queued(w, sent, position)
		w.queued = true
		e := w.event(EventEnqueued)
		e.Position = position
		l.observe(e)
		if ac.onQueued != nil {
			ac.onQueued(position)
		}
		if ac.onPosition != nil {
			ac.onPosition(position)
		}
		select {
		case fence := <-w.granted:
			s, err := l.accept(ctx, w, fence, start)
			if err != errGrantExpired {
				return s, err
			}
		case <-w.evicted:
			// Queue anew, at the back. Redis may still hold the old entry if
			// only the heartbeat's replies were lost: withdraw it by token.
			l.leave(w, ErrPlaceLost)
		case <-ctx.Done():
			l.leave(w, ctx.Err())
			return nil, ctxError(ctx, ctx.Err())
		case <-l.closing:
			l.leave(w, ErrClosed)
			return nil, ErrClosed
		}
	}
}

// errGrantExpired means a grant expired before its waiter heard of it.
var errGrantExpired = errors.New("fairlock: grant expired unclaimed")

// accept turns a grant notification into a Lease. The grant lives only
// until the waiter's last heartbeat deadline; when that is near or past (the
// message came late, or this process was paused), it is confirmed with one
// round trip before it is trusted. errGrantExpired means the place is lost
// and the waiter must queue anew.
func (l *Locker) accept(ctx context.Context, w *waiter, fence int64, start time.Time) (*Lease, error) {
	l.mu.Lock()
	deadline := w.since.Add(min(l.cfg.waiterTTL, l.cfg.leaseTTL))
	l.mu.Unlock()
	claimed := false
	if time.Until(deadline) < l.heartbeat {
		sent := time.Now()
		held, err := w.ref.scripts.extend.run(ctx, l.client, w.ref, w.ref.call(w.token, l.leaseMs, metaFlag(w.meta != ""))).Int()
		if err != nil {
			l.leave(w, ctxError(ctx, err))
			return nil, ctxError(ctx, fmt.Errorf("fairlock: acquire %s: %w", quoteName(w.ref.name), err))
		}
		if held == 0 {
			l.forget(w)
			e := w.event(EventCancelled)
			e.Wait, e.Queued, e.Err = time.Since(w.start), true, fmt.Errorf("%w: %w", ErrPlaceLost, errGrantExpired)
			l.observe(e)
			return nil, errGrantExpired
		}
		deadline, claimed = sent.Add(l.cfg.leaseTTL), true
	}
	l.forget(w)
	return l.grant(ctx, w, fence, deadline, claimed, start, true)
}

// enqueue runs acquire.lua for w. It runs on the caller's goroutine: a
// goroutine aside, which would let a cancelled Acquire return while Redis
// stalls, costs a third of an uncontended acquire on a two-core machine.
// So a call already sent ends when go-redis returns (its read timeout, or
// the context's deadline with ContextTimeoutEnabled), and then leaves.
func (l *Locker) enqueue(ctx context.Context, w *waiter, mode any) (int64, error) {
	args := w.ref.call(w.token, l.leaseMs, l.waiterMs, w.ref.notify[0], w.ref.notify[1], mode, metaValue(w.meta))
	if w.req.capacity != nil {
		args = append(args, w.req.capacity)
	}
	reply, err := w.ref.scripts.acquire.run(ctx, l.client, w.ref, args).Int64()
	switch {
	case err != nil && redis.HasErrorPrefix(err, capacityRefused):
		// Refused before any change: like a bad argument, it never queued.
		l.forget(w)
		in := strings.TrimSpace(strings.TrimPrefix(err.Error(), capacityRefused))
		return 0, fmt.Errorf("%w: semaphore %s is in use with capacity %s, not %v", ErrInvalid, quoteName(w.ref.name), in, w.req.capacity)
	case err != nil:
		// The reply may be lost, not the request: remove the entry by its token.
		l.leave(w, ctxError(ctx, err))
	}
	return reply, err
}

// capacityRefused starts acquire.lua's error for a semaphore in use with
// another capacity.
const capacityRefused = "FAIRLOCK_CAPACITY"

// ctxError makes err match ctx.Err() when the context ended, whatever the
// Redis client reported (often an I/O timeout).
func ctxError(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	return err
}

// enter counts a call in, unless the Locker is closed.
func (l *Locker) enter() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.calls.Add(1)
	return true
}

// newWaiter registers a waiter under a fresh token before the request that
// queues it is sent, so that a grant message arriving right after finds it.
func (l *Locker) newWaiter(req request, start time.Time, meta string) *waiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	w := &waiter{
		ref:     req.ref,
		req:     req,
		meta:    meta,
		token:   l.id + ":" + strconv.FormatUint(l.seq, 36) + req.suffix,
		start:   start,
		granted: make(chan int64, 1),
		evicted: make(chan struct{}, 1),
	}
	l.waiters[w.token] = w
	return w
}

// event starts an Event about w.
func (w *waiter) event(kind EventKind) Event {
	return Event{Kind: kind, Name: w.ref.name, Lock: w.req.kind, Permits: w.req.permits, Token: w.token}
}

// queued puts a waiter in Redis's queue under the heartbeat's care.
func (l *Locker) queued(w *waiter, sent time.Time, position int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w.since, w.position = sent, position
	ll := l.local(w.ref, w.req.capacity)
	if ll.waiters == nil {
		ll.waiters = map[*waiter]struct{}{}
	}
	ll.waiters[w] = struct{}{}
}

// forget removes a waiter from this Locker's books.
func (l *Locker) forget(w *waiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.waiters, w.token)
	if ll := l.locks[w.ref.key()]; ll != nil {
		delete(ll.waiters, w)
		l.dropIfIdle(ll)
	}
}

// leave withdraws w from the queue, waiting for that at most one heartbeat:
// a stalled Redis must not hold up the caller, and Redis drops the entry by
// itself after the waiter TTL.
func (l *Locker) leave(w *waiter, why error) {
	l.forget(w)
	left := w.event(EventCancelled)
	left.Wait, left.Queued = time.Since(w.start), w.queued
	finished := make(chan struct{})
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		defer close(finished)
		l.withdraw(w, why, left)
	}()
	timer := time.NewTimer(l.heartbeat)
	defer timer.Stop()
	select {
	case <-finished:
	case <-timer.C:
	}
}

// withdraw takes a waiter out of the queue, or releases the lock if it was
// granted meanwhile, bounded by the waiter TTL, then reports left with why.
func (l *Locker) withdraw(w *waiter, why error, left Event) {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.waiterTTL)
	defer cancel()
	until := time.Now().Add(l.cfg.leaseTTL)
	if err := l.cancelToken(ctx, w.ref, w.token, w.meta != ""); err != nil {
		// The token may hold the lock (the reply of a take was lost), and
		// nobody else can free it before its lease ends: the heartbeat
		// tries again until Redis answers.
		l.mu.Lock()
		l.pending[w.token] = withdrawal{ref: w.ref, hasMeta: w.meta != "", until: until}
		l.mu.Unlock()
		why = errors.Join(why, fmt.Errorf("fairlock: leaving the queue: %w", err))
	}
	left.Err = why
	l.observe(left)
}

// A withdrawal is a token whose cancel.lua failed: it may hold the lock or
// a place in the queue until its lease would have ended.
type withdrawal struct {
	ref     *lockRef
	hasMeta bool
	until   time.Time
}

// cancelToken runs cancel.lua for token.
func (l *Locker) cancelToken(ctx context.Context, ref *lockRef, token string, hasMeta bool) error {
	return ref.scripts.cancel.run(ctx, l.client, ref, ref.call(token, ref.notify[0], ref.notify[1], metaFlag(hasMeta))).Err()
}

// retryWithdrawals runs the withdrawals that failed before, once each.
func (l *Locker) retryWithdrawals() {
	l.mu.Lock()
	pending := make(map[string]withdrawal, len(l.pending))
	for token, wd := range l.pending {
		if time.Now().After(wd.until) {
			delete(l.pending, token) // expired in Redis by now
			continue
		}
		pending[token] = wd
	}
	l.mu.Unlock()
	for token, wd := range pending {
		ctx, cancel := context.WithTimeout(context.Background(), l.heartbeat)
		err := l.cancelToken(ctx, wd.ref, token, wd.hasMeta)
		cancel()
		if err == nil {
			l.mu.Lock()
			delete(l.pending, token)
			l.mu.Unlock()
		}
	}
}

// local returns this Locker's record of a lock, creating it, and notes the
// capacity a waiter or lease on it asked for (nil for a mutex). l.mu is held.
func (l *Locker) local(ref *lockRef, capacity any) *localLock {
	ll := l.locks[ref.key()]
	if ll == nil {
		ll = &localLock{ref: ref, capacity: noCapacity}
		ll.leases = ll.one[:0]
		l.locks[ref.key()] = ll
	}
	if capacity != nil {
		ll.capacity = capacity
	}
	return ll
}

// dropIfIdle forgets a lock with no waiter and no lease here. l.mu is held.
func (l *Locker) dropIfIdle(ll *localLock) {
	if ll != nil && len(ll.leases) == 0 && len(ll.waiters) == 0 {
		delete(l.locks, ll.ref.key())
	}
}

// grant makes the Lease for w's granted token and puts it under the
// heartbeat's care. If the Locker was closed meanwhile, the lock is released
// at once rather than left to a holder nobody will return it to. queued says
// whether the token had been reported by EventEnqueued.
func (l *Locker) grant(ctx context.Context, w *waiter, fence int64, deadline time.Time, claimed bool, start time.Time, queued bool) (*Lease, error) {
	ref, token := w.ref, w.token
	s := &Lease{
		locker:  l,
		ref:     ref,
		kind:    w.req.kind,
		permits: w.req.permits,
		token:   token,
		fence:   fence,
		hasMeta: w.meta != "",
		done:    make(chan struct{}),
		claimed: claimed,
	}
	s.mu.Lock()
	s.setDeadline(deadline)
	s.mu.Unlock()
	l.mu.Lock()
	closed := l.closed
	if !closed {
		ll := l.local(ref, w.req.capacity)
		ll.leases = append(ll.leases, s)
	}
	l.mu.Unlock()
	// A grant given up here ends as EventCancelled; the lease, never handed
	// out, reports no end of its own (see Lease.end).
	if closed {
		s.release(context.Background()) //nolint:errcheck // best effort; the lease expires anyway
		e := w.event(EventCancelled)
		e.Wait, e.Queued, e.Err = time.Since(start), queued, ErrClosed
		l.observe(e)
		return nil, ErrClosed
	}
	if l.cfg.replicas > 0 {
		if err := l.awaitReplicas(ctx, s); err != nil {
			err = ctxError(ctx, fmt.Errorf("fairlock: acquire %s: %w", quoteName(ref.name), err))
			e := w.event(EventCancelled)
			e.Wait, e.Queued, e.Err = time.Since(start), queued, err
			l.observe(e)
			return nil, err
		}
	}
	s.mu.Lock()
	s.granted = time.Now()
	lost := s.err != nil
	s.mu.Unlock()
	e := w.event(EventGranted)
	e.Fence, e.Wait, e.Queued = fence, time.Since(start), queued
	l.observe(e)
	if lost {
		// Its expiry timer ended it before it was handed out, and Lease.end
		// did not report that: report it now, so every grant has an end.
		e := w.event(EventLost)
		e.Fence, e.Err = fence, ErrLost
		l.observe(e)
	}
	return s, nil
}

// Do runs fn while holding the lock called name, then releases it. fn's
// context is cancelled, with cause ErrLost, if the lease is lost. If it was
// lost while fn ran, the error matches ErrLost, joined with fn's own error.
// opts apply to the Acquire.
func (l *Locker) Do(ctx context.Context, name string, fn func(ctx context.Context) error, opts ...AcquireOption) error {
	lease, err := l.Acquire(ctx, name, opts...)
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
	fnErr := fn(fnCtx)
	cancel(nil)
	relCtx, relCancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.leaseTTL)
	defer relCancel()
	relErr := lease.Release(relCtx)
	if errors.Is(lease.Err(), ErrLost) {
		return errors.Join(fnErr, ErrLost)
	}
	return errors.Join(fnErr, relErr)
}

// State is a snapshot of one lock, as Inspect reads it.
type State struct {
	Held     bool          // someone holds the lock
	Holder   string        // the holder's lease token, if held
	Metadata string        // the holder's metadata (WithMetadata), "" if none
	Fence    int64         // the latest fence drawn (0 if none is known): the holder's, or above it if a call that found the lock taken drew one since
	Waiters  int           // live waiters in the queue, not counting the holder
	TTL      time.Duration // how long the lease has left, if held
}

// Inspect reads the state of the lock called name in one round trip.
func (l *Locker) Inspect(ctx context.Context, name string) (State, error) {
	if err := checkName(name); err != nil {
		return State{}, err
	}
	ref := l.ref(spaceMutex, name)
	reply, err := inspectScript.run(ctx, l.client, ref, ref.call()).Result()
	if err != nil {
		return State{}, fmt.Errorf("fairlock: inspect %s: %w", quoteName(name), err)
	}
	return parseState(reply)
}

// Close ends pending Acquire calls with ErrClosed (they leave their queues),
// releases the leases this Locker holds, and stops its goroutines. Calls
// after Close return ErrClosed. Close is idempotent.
func (l *Locker) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.closing)
	l.mu.Unlock()
	l.calls.Wait()

	l.mu.Lock()
	var held []*Lease
	for _, ll := range l.locks {
		held = append(held, ll.leases...)
	}
	l.mu.Unlock()
	var errs []error
	for _, s := range held {
		ctx, cancel := context.WithTimeout(context.Background(), l.cfg.leaseTTL)
		if err := s.release(ctx); err != nil && !errors.Is(err, ErrNotHeld) {
			errs = append(errs, err)
		}
		cancel()
	}
	close(l.stopped)
	errs = append(errs, l.closeSubscriptions())
	l.bg.Wait()
	return errors.Join(errs...)
}
