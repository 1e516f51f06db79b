package fairlocktest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/history"
)

// Recorder collects the events of one or more Lockers, in the order the
// Lockers report them. Install it with rec.Option() when making each
// Locker: it sees the events of those Lockers only, so its checks are about
// the waiters and leases of those Lockers. It is safe for concurrent use,
// and its Record never blocks for long, as an observer must not.
//
// A mutex, a Semaphore and an RWMutex of the same name are independent
// locks, each with its own queue and fences; the checks take a name and
// look at each of them on its own, telling them apart by Event.Lock. An
// event whose Lock is none of fairlock.Kinds is an error of the checks
// that take its name, never taken for another kind's.
type Recorder struct {
	mu       sync.Mutex
	events   []fairlock.Event
	releases map[string]int // lease token -> len(events) when Release was called on it
	changed  chan struct{}  // closed and replaced on every event
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{changed: make(chan struct{})}
}

// Option installs the Recorder as a Locker's observer.
func (r *Recorder) Option() fairlock.Option { return fairlock.WithObserver(r.Record) }

// Record appends e. It is the observer function.
func (r *Recorder) Record(e fairlock.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// Events returns a copy of every event so far.
func (r *Recorder) Events() []fairlock.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Reset forgets every event so far, and every Release.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.events, r.releases = nil, nil
	r.mu.Unlock()
}

// Release notes that lease is being released, then releases it and returns
// what lease.Release returns. CheckCapacity and CheckExclusive count a
// lease released this way as held until the call, which is what they need
// to be exact: a lease released with lease.Release counts until its
// Locker reports EventReleased, after Redis replied, and by then the next
// holder, woken by the same script, has often reported its grant (in more
// than half of all hand-offs). The checks would see the two overlap
// although they never did. An overlap they report between leases released
// through the Recorder did happen: each was granted before the other's
// grant was reported, and released after.
func (r *Recorder) Release(ctx context.Context, lease *fairlock.Lease) error {
	r.releasing(lease.Token())
	return lease.Release(ctx)
}

// releasing notes that Release is being called on the lease token, unless
// it was before.
func (r *Recorder) releasing(token string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.releases == nil {
		r.releases = map[string]int{}
	}
	if _, ok := r.releases[token]; !ok {
		r.releases[token] = len(r.events)
	}
}

// Filter returns the events of lock name with the given kind, in order.
func (r *Recorder) Filter(name string, kind fairlock.EventKind) []fairlock.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []fairlock.Event
	for _, e := range r.events {
		if e.Name == name && e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// Granted returns the tokens that were granted lock name, in grant order:
// the order of their fences, which is the order in which Redis granted
// them (the holders of a Semaphore or RWMutex may report grants made
// together in any order). Compare them with Lease.Token. If a mutex, a
// Semaphore and an RWMutex share the name, the mutex's grants come first,
// then the Semaphore's, then the RWMutex's, as fairlock.Kinds lists them;
// grants of a kind it does not list are left out, and the checks report
// them.
func (r *Recorder) Granted(name string) []string {
	var out []string
	for _, g := range r.groups(name) {
		var grants []fairlock.Event
		for _, e := range g.events {
			if e.Kind == fairlock.EventGranted {
				grants = append(grants, e)
			}
		}
		out = append(out, tokens(byFence(grants))...)
	}
	return out
}

// Enqueued returns the tokens that queued for lock name, in the order the
// Recorder saw them queue. A waiter that found the lock free and was
// granted at once never queued and is not listed.
func (r *Recorder) Enqueued(name string) []string {
	return tokens(r.Filter(name, fairlock.EventEnqueued))
}

// Wait blocks until at least n events of kind were recorded for lock name,
// or ctx ends. Use it to sequence a test: start waiter A, Wait for one
// EventEnqueued, start waiter B, Wait for two, and so on.
func (r *Recorder) Wait(ctx context.Context, name string, kind fairlock.EventKind, n int) error {
	for {
		r.mu.Lock()
		got := 0
		for _, e := range r.events {
			if e.Name == name && e.Kind == kind {
				got++
			}
		}
		changed := r.changed
		r.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("fairlocktest: waiting for %d %v events on %q, saw %d: %w", n, kind, name, got, ctx.Err())
		}
	}
}

// CheckFIFO reports an error unless each lock of that name (the mutex, the
// Semaphore, the RWMutex) was granted to its queued waiters in the order
// they queued, readers and writers of an RWMutex in one queue. Grant order
// is fence order. Waiters that never got the lock (cancelled, or evicted
// for silence) are left out of the comparison, and so are those granted
// without queueing.
//
// The queue order that counts is the order enqueues reached Redis; the
// Recorder sees the order the Lockers reported them. The two agree when the
// test lets each waiter queue before starting the next (see Wait), which is
// what a test of ordering should do anyway.
func (r *Recorder) CheckFIFO(name string) error {
	return r.each(name, func(g group) error {
		// As assumed above, a waiter's enqueue stands for its call: those
		// queued before it must be granted before it.
		for i, q := range g.model.Reqs {
			g.model.Reqs[i].Called = q.Entered
		}
		for _, v := range g.model.CheckFIFO() {
			a, b := g.named[v.Others[0]], g.named[v.Req]
			return fmt.Errorf("fairlocktest: %s granted %s (fence %d) before %s (fence %d), which queued first", g, b.Token, b.Fence, a.Token, a.Fence)
		}
		return nil
	})
}

// CheckGrantOrder reports an error unless the grants of lock name, in
// order, were to exactly these tokens.
func (r *Recorder) CheckGrantOrder(name string, tokens ...string) error {
	if errs := r.unknownKinds(name); len(errs) > 0 {
		return errors.Join(errs...)
	}
	if got := r.Granted(name); !slices.Equal(got, tokens) {
		return fmt.Errorf("fairlocktest: %q grant order:\n got  %v\n want %v", name, got, tokens)
	}
	return nil
}

// CheckFences reports an error unless the fences of each lock of that
// name are distinct and follow the order in which grants were reported
// around every exclusive grant (a mutex's, a writer's): no grant with a
// lower fence is reported after it, none with a higher fence before it.
// For a mutex that is fences strictly increasing in the order reported.
// Readers and semaphore holders granted together may report in any order,
// so among them only distinctness is checked, and so it is for leases that
// were lost, whose grant may have been reported late.
func (r *Recorder) CheckFences(name string) error {
	return r.each(name, func(g group) error {
		vs := g.model.CheckFences()
		if len(vs) == 0 {
			return nil
		}
		v := vs[0]
		a, b := g.named[v.Others[0]], g.named[v.Req]
		if v.Rule == history.FenceTwice {
			return fmt.Errorf("fairlocktest: %s granted fence %d twice, to %s and %s", g, b.Fence, a.Token, b.Token)
		}
		return fmt.Errorf("fairlocktest: %s fence went from %d (%s) to %d (%s)", g, a.Fence, a.Token, b.Fence, b.Token)
	})
}

// CheckCapacity reports an error if the leases of the Semaphore called
// name ever held more than capacity permits at once. A lease counts, with
// its Event.Permits, from its EventGranted until its EventLost, or until
// Release on this Recorder was called on it; one released with its own
// Release counts until its EventReleased (see Release for why that may
// show an overlap that did not happen). A lease still held counts to the
// end.
//
// A lease found lost by the heartbeat (taken by ForceRelease, or forgotten
// by Redis) counts until then: its holder believed it held it.
func (r *Recorder) CheckCapacity(name string, capacity int) error {
	if capacity < 1 {
		return fmt.Errorf("fairlocktest: capacity %d of semaphore %q is below 1", capacity, name)
	}
	return r.each(name, func(g group) error {
		if g.kind.Lock != fairlock.LockSemaphore {
			return nil
		}
		return g.overlap(int64(capacity), func(e fairlock.Event, permits int, holders, hint string) error {
			return fmt.Errorf("fairlocktest: %s held %d permits at once, over its capacity %d, when %s took %d;\n holders %s%s",
				g, permits, capacity, e.Token, e.Permits, holders, hint)
		})
	})
}

// CheckExclusive reports an error if a writer of the RWMutex called name
// held it together with another holder, reader or writer. Leases count as
// for CheckCapacity.
func (r *Recorder) CheckExclusive(name string) error {
	return r.each(name, func(g group) error {
		if g.kind.Lock != fairlock.LockRWMutex {
			return nil
		}
		return g.overlap(fairlock.MaxCapacity, func(e fairlock.Event, _ int, holders, hint string) error {
			return fmt.Errorf("fairlocktest: %s granted %s to %s while held by %s%s", g, request(e), e.Token, holders, hint)
		})
	})
}

// AssertFIFO fails the test if CheckFIFO reports an error.
func (r *Recorder) AssertFIFO(t testing.TB, name string) {
	t.Helper()
	if err := r.CheckFIFO(name); err != nil {
		t.Error(err)
	}
}

// AssertGrantOrder fails the test if CheckGrantOrder reports an error.
func (r *Recorder) AssertGrantOrder(t testing.TB, name string, tokens ...string) {
	t.Helper()
	if err := r.CheckGrantOrder(name, tokens...); err != nil {
		t.Error(err)
	}
}

// AssertFences fails the test if CheckFences reports an error.
func (r *Recorder) AssertFences(t testing.TB, name string) {
	t.Helper()
	if err := r.CheckFences(name); err != nil {
		t.Error(err)
	}
}

// AssertCapacity fails the test if CheckCapacity reports an error.
func (r *Recorder) AssertCapacity(t testing.TB, name string, capacity int) {
	t.Helper()
	if err := r.CheckCapacity(name, capacity); err != nil {
		t.Error(err)
	}
}

// AssertExclusive fails the test if CheckExclusive reports an error.
func (r *Recorder) AssertExclusive(t testing.TB, name string) {
	t.Helper()
	if err := r.CheckExclusive(name); err != nil {
		t.Error(err)
	}
}

// A group is the events of one lock: a name and a kind of lock.
type group struct {
	name     string
	kind     fairlock.KindInfo
	events   []fairlock.Event
	released map[string]bool // leases Release was called on through the Recorder
	// model is what the shared checks see of the lock: a request for each
	// token that queued or was granted, timed by the places of its events
	// among all the Recorder's; named[i] is the grant (or else the first)
	// event of model.Reqs[i].
	model history.Lock
	named []fairlock.Event
}

// request names what an event's request asks for: a reader or writer of
// a kind whose requests may share it (a read-write lock), or its kind.
func request(e fairlock.Event) string {
	switch {
	case !shares(e.Lock):
		return e.Lock.String()
	case e.Shared:
		return "read"
	}
	return "write"
}

// shares tells whether the requests of kind k may share a lock.
func shares(k fairlock.LockKind) bool {
	kd, err := k.Info()
	return err == nil && kd.Shared
}

// group returns the events of the lock of kind kd called name, and its
// model. Its capacity is what the Recorder knows: the kind's, unless each
// lock has its own (only CheckCapacity is told a Semaphore's, so for
// CheckFences none of its grants is exclusive); no call is seen. A lease
// ends at its EventReleased or EventLost, or where Release was called on
// it through the Recorder, whichever came first.
func (r *Recorder) group(name string, kd fairlock.KindInfo) group {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := group{name: name, kind: kd, released: map[string]bool{}}
	g.model.Cap = int64(kd.Capacity)
	if kd.Capacity == 0 {
		g.model.Cap = history.Never
	}
	index := map[string]int{} // token -> request
	for at, e := range r.events {
		if e.Name != name || e.Lock != kd.Lock {
			continue
		}
		g.events = append(g.events, e)
		i, ok := index[e.Token]
		if !ok {
			if e.Kind != fairlock.EventEnqueued && e.Kind != fairlock.EventGranted {
				continue // no waiter or lease seen
			}
			i, index[e.Token] = len(g.named), len(g.named)
			g.named = append(g.named, e)
			g.model.Reqs = append(g.model.Reqs, history.Request{Called: math.MinInt64, Entered: history.Never, Granted: history.Never, End: history.Never})
		}
		q := &g.model.Reqs[i]
		switch e.Kind {
		case fairlock.EventEnqueued:
			q.Entered = min(q.Entered, int64(at)) // a waiter evicted for silence queues again: its first place counts
		case fairlock.EventGranted:
			if q.Granted == history.Never {
				q.Granted, q.Fence, g.named[i] = int64(at), e.Fence, e
			}
		case fairlock.EventReleased, fairlock.EventLost:
			q.End = min(q.End, int64(at))
			q.Lost = q.Lost || e.Kind == fairlock.EventLost
		}
	}
	for i, e := range g.named {
		q := &g.model.Reqs[i]
		q.Permits = int64(max(e.Permits, 1)) // 0 in an Event made by hand
		if kd.Shared && !e.Shared {
			q.Permits = int64(kd.Capacity) // a writer takes all
		}
		if p, ok := r.releases[e.Token]; ok {
			q.End, g.released[e.Token] = min(q.End, int64(p)), true
		}
		q.Exempt = q.Entered == history.Never || q.Granted == history.Never // CheckFIFO compares only these
	}
	return g
}

// groups returns the locks called name that have events, in the order of
// fairlock.Kinds: the mutex, the Semaphore, the RWMutex.
func (r *Recorder) groups(name string) []group {
	var out []group
	for _, kd := range fairlock.Kinds() {
		if g := r.group(name, kd); len(g.events) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// each joins what check reports of each lock called name, and an error
// for each event of that name whose kind is none of fairlock.Kinds.
func (r *Recorder) each(name string, check func(group) error) error {
	errs := r.unknownKinds(name)
	for _, g := range r.groups(name) {
		errs = append(errs, check(g))
	}
	return errors.Join(errs...)
}

// unknownKinds reports the events of lock name whose kind is none of
// fairlock.Kinds, once a kind.
func (r *Recorder) unknownKinds(name string) []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	seen := map[fairlock.LockKind]bool{}
	for _, e := range r.events {
		if e.Name != name || seen[e.Lock] {
			continue
		}
		if _, err := e.Lock.Info(); err != nil {
			seen[e.Lock] = true
			errs = append(errs, fmt.Errorf("fairlocktest: %s event of %s on %q: %w", e.Kind, e.Token, name, err))
		}
	}
	return errs
}

// String names the lock in errors: "mutex \"jobs\"".
func (g group) String() string { return fmt.Sprintf("%s %q", g.kind.Lock, g.name) }

// overlap reports, through fail, the first grant of g that took more than
// capacity permits: its event, the permits held with it, and the holders
// then, by fence, as "token(lock permits)". A hint comes with them if a
// holder may have overlapped only in the reports: one released with its
// own Release counts until its Locker heard back.
func (g group) overlap(capacity int64, fail func(e fairlock.Event, permits int, holders, hint string) error) error {
	l := g.model
	l.Cap = capacity
	vs := l.CheckCapacity()
	if len(vs) == 0 {
		return nil
	}
	v := vs[0]
	e, hint := g.named[v.Req], ""
	permits, held := e.Permits, []fairlock.Event(nil)
	for _, i := range v.Others {
		h, q := g.named[i], l.Reqs[i]
		permits += h.Permits
		held = append(held, h)
		if q.End != history.Never && !q.Lost && !g.released[h.Token] {
			hint = "\n (a lease released with Lease.Release counts until its EventReleased, which may come after the next grant's report: release through Recorder.Release)"
		}
	}
	var holders []string
	for _, h := range byFence(held) {
		holders = append(holders, fmt.Sprintf("%s(%s %d)", h.Token, request(h), h.Permits))
	}
	return fail(e, permits, fmt.Sprint(holders), hint)
}

// byFence sorts events by fence, keeping the reported order among equal
// fences.
func byFence(events []fairlock.Event) []fairlock.Event {
	slices.SortStableFunc(events, func(a, b fairlock.Event) int { return cmp.Compare(a.Fence, b.Fence) })
	return events
}

func tokens(events []fairlock.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Token
	}
	return out
}
