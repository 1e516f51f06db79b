package fairlock

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fairlock/fairlock/internal/redistest"
)

// A kind of lock defined in this file only, as docs/design.md's "A
// newcomer's path" adds one: a pair, a semaphore of 2 permits in a key
// space of its own, whose requests take one each. Registered in this test
// binary's kinds, it is served by the engine (the fast path's refusal,
// acquire.lua, the queue, grants, the heartbeat), Inspect, Locks,
// ForceRelease, the events and, through newcomer_recorder_test.go (an
// external test, since fairlocktest imports this package), fairlocktest's
// Recorder, with no change to any other file.

// LockPair is the pair's LockKind, far from the package's own.
const LockPair LockKind = 100

var pairKind = &kind{lock: LockPair, name: "pair", space: "pair:", scripts: countedScripts,
	holderSet: true, capacity: 2, priorities: true}

func init() { kinds = append(kinds, pairKind) }

// A Pair is the pair's handle.
type Pair struct {
	locker *Locker
	req    request
}

// Pair returns the pair called name.
func (l *Locker) Pair(name string) (*Pair, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	return &Pair{locker: l, req: request{ref: l.refs.get(pairKind, name), permits: 1, capacity: 2}}, nil
}

// Acquire waits, in FIFO order, for one of the pair's two permits.
func (p *Pair) Acquire(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return p.locker.acquire(ctx, p.req, true, opts)
}

// TryAcquire takes one of its permits only if one is free and nobody
// waits.
func (p *Pair) TryAcquire(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return p.locker.acquire(ctx, p.req, false, opts)
}

// Every kind's value, name and key space are its own, so that events,
// Inspect, Locks and keys never take one kind for another. (FuzzLockKeys
// checks that no key of one is another's.)
func TestKindsAreDistinct(t *testing.T) {
	t.Parallel()
	seen := map[any]bool{}
	for _, k := range kinds {
		for _, v := range []any{k.lock, k.name, "space " + k.space} {
			if seen[v] {
				t.Errorf("kind %s: %v is another kind's", k.name, v)
			}
			seen[v] = true
		}
	}
}

func TestNewcomersKind(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	first := make(chan Event, 1)
	l, err := New(srv.Client(t), WithLeaseTTL(time.Second), WithWaiterTTL(600*time.Millisecond),
		WithObserver(func(e Event) {
			select {
			case first <- e:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	take := func(lease *Lease, err error) *Lease {
		if err != nil {
			t.Error(err)
		}
		return lease
	}
	p, _ := l.Pair("two")
	a, b := take(p.Acquire(ctx)), take(p.Acquire(ctx))
	if e := <-first; e.Lock != LockPair || e.Lock.String() != "pair" || e.Permits != 1 || e.Token != a.Token() {
		t.Errorf("first event: %+v", e)
	}
	third := make(chan *Lease)
	go func() { third <- take(p.Acquire(ctx)) }()
	st := waitQueued(t, ctx, l, "two")
	if _, err := p.TryAcquire(ctx); err != ErrNotAcquired {
		t.Errorf("TryAcquire of a full pair: %v", err)
	}
	if _, err := p.Acquire(ctx, WithGroup("g")); !errors.Is(err, ErrInvalid) {
		t.Errorf("a pair took WithGroup: %v", err)
	}
	if st.Lock != LockPair || st.Capacity != 2 || st.InUse != 2 || len(st.Holders) != 2 || len(st.Waiters) != 1 ||
		st.Holders[0].Fence+st.Holders[1].Fence != a.Fence()+b.Fence() || st.Holders[0].Permits != 1 || st.Holders[0].Shared {
		t.Errorf("Inspect: %+v; fences %d and %d", st, a.Fence(), b.Fence())
	}
	mu := take(l.Acquire(ctx, "two")) // a mutex of the same name is another lock
	if locks, err := l.Locks(ctx); err != nil || !slices.Equal(locks, []LockInUse{{"two", LockMutex}, {"two", LockPair}}) {
		t.Errorf("Locks: %v, %v", locks, err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c := <-third
	if c.Fence() <= b.Fence() {
		t.Errorf("the waiter's fence %d is not above %d", c.Fence(), b.Fence())
	}
	// ForceRelease takes c; the heartbeat reads its record back from the
	// holders' set, and finds it gone.
	if _, err := l.ForceRelease(ctx, LockPair, "two", c.Token()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the heartbeat did not find the forced release")
	}
	for _, lease := range []*Lease{b, mu} {
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// waitQueued returns the pair's state once a waiter is queued.
func waitQueued(t *testing.T, ctx context.Context, l *Locker, name string) State {
	t.Helper()
	for {
		st, err := l.Inspect(ctx, LockPair, name)
		if err != nil || ctx.Err() != nil {
			t.Fatalf("Inspect: %v, %v", err, ctx.Err())
		}
		if st.Queued > 0 {
			return st
		}
		time.Sleep(5 * time.Millisecond)
	}
}
