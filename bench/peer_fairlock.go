//go:build fairlock

package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/scripts"
	"github.com/redis/go-redis/v9"
)

// fairlockBuilt: this binary runs the fairlock peer.
const fairlockBuilt = true

type fairlockWorker struct {
	cl *redis.Client
	l  *fairlock.Locker
}

func (w *fairlockWorker) Lock(ctx context.Context, name string) (unlockFunc, error) {
	lease, err := w.l.Acquire(ctx, name)
	if err != nil {
		return nil, err
	}
	return lease.Release, nil
}

// Queued reports the live waiters on name (used to know when every waiter
// of the scale scenario has been enqueued).
func (w *fairlockWorker) Queued(ctx context.Context, name string) (int, error) {
	st, err := w.l.Inspect(ctx, fairlock.LockMutex, name)
	return st.Queued, err
}

func (w *fairlockWorker) Semaphore(ctx context.Context, name string, capacity, n int) (taken, error) {
	return w.semaphore(ctx, name, capacity, n)
}

// SemaphoreGroup takes n permits for a request of group (WithGroup), of
// weight (WithGroupWeight, named only when not 1).
func (w *fairlockWorker) SemaphoreGroup(ctx context.Context, name string, capacity, n int, group string, weight int) (taken, error) {
	if weight != 1 {
		return w.semaphore(ctx, name, capacity, n, fairlock.WithGroup(group), fairlock.WithGroupWeight(weight))
	}
	return w.semaphore(ctx, name, capacity, n, fairlock.WithGroup(group))
}

// SemaphorePriority takes n permits for a request of priority
// (WithPriority, named only when not 0).
func (w *fairlockWorker) SemaphorePriority(ctx context.Context, name string, capacity, n, priority int) (taken, error) {
	if priority != 0 {
		return w.semaphore(ctx, name, capacity, n, fairlock.WithPriority(priority))
	}
	return w.semaphore(ctx, name, capacity, n)
}

func (w *fairlockWorker) semaphore(ctx context.Context, name string, capacity, n int, opts ...fairlock.AcquireOption) (taken, error) {
	s, err := w.l.Semaphore(name, capacity)
	if err != nil {
		return taken{}, err
	}
	var q queuedAt
	lease, err := s.Acquire(ctx, n, append(opts, fairlock.OnQueued(q.note))...)
	if err != nil {
		return taken{}, err
	}
	return taken{unlock: lease.Release, n: n, fence: lease.Fence(), queued: q.Load()}, nil
}

func (w *fairlockWorker) RWLock(ctx context.Context, name string, write bool) (taken, error) {
	m, err := w.l.RWMutex(name)
	if err != nil {
		return taken{}, err
	}
	var q queuedAt
	take := m.RLock
	if write {
		take = m.Lock
	}
	lease, err := take(ctx, fairlock.OnQueued(q.note))
	if err != nil {
		return taken{}, err
	}
	return taken{unlock: lease.Release, write: write, fence: lease.Fence(), queued: q.Load()}, nil
}

// SemaphoreQueued reports the live waiters of the semaphore name.
func (w *fairlockWorker) SemaphoreQueued(ctx context.Context, name string) (int, error) {
	st, err := w.l.Inspect(ctx, fairlock.LockSemaphore, name)
	return st.Queued, err
}

// Heartbeat is the Locker's heartbeat period (the scale row's idle
// windows span a few).
func (w *fairlockWorker) Heartbeat() time.Duration { return w.l.Heartbeat() }

// queuedAt is when OnQueued last said the call joined the queue: the reply
// that says so has come back, so the waiter is in Redis's queue by then. A
// waiter that lost its place and queued anew counts from the new place.
type queuedAt struct{ atomic.Int64 }

func (q *queuedAt) note(int) { q.Store(mono()) }

func (w *fairlockWorker) Close() error {
	err := w.l.Close()
	w.cl.Close()
	return err
}

func newFairlockWorker(e *env, c *counters) (*fairlockWorker, error) {
	cl := e.client(c)
	opts := []fairlock.Option{fairlock.WithLeaseTTL(e.LeaseTTL)}
	if e.Aging != 0 {
		opts = append(opts, fairlock.WithPriorityAging(e.Aging))
	}
	l, err := fairlock.New(cl, opts...)
	if err != nil {
		cl.Close()
		return nil, err
	}
	return &fairlockWorker{cl: cl, l: l}, nil
}

func fairlockPeer() peer {
	return peer{
		Name:       "fairlock",
		Settings:   "fairlock (this repo), one Locker per worker/process, WithLeaseTTL(lease), default WaiterTTL 3s, auto-renew on",
		Redis:      true,
		Concurrent: true,
		New: func(e *env, c *counters) (worker, error) {
			w, err := newFairlockWorker(e, c)
			if err != nil {
				return nil, err
			}
			return w, nil
		},
		Kinds: func(e *env, c *counters) (kindWorker, error) {
			w, err := newFairlockWorker(e, c)
			if err != nil {
				return nil, err
			}
			return w, nil
		},
		KindSettings: "Locker.Semaphore(name, capacity).Acquire(ctx, n) and Locker.RWMutex(name).RLock/Lock, with OnQueued to note when the call joined the queue; the lease's Fence gives the grant order; the tenants row's groups: Acquire(ctx, 1, WithGroup(tenant)), and in the weighted tenants row WithGroupWeight(w) beside it; in the priority-lanes row the interactive workers' Acquire(ctx, 1, WithPriority(9)), the Lockers of its run with priorities made WithPriorityAging(-pl-aging)",
	}
}

// fairlockSharedPeer is fairlock as the README uses it: every worker of
// one process on one Locker (and so one client). Mutex rows only.
func fairlockSharedPeer() peer {
	var shared sharedLocker
	return peer{
		Name:       "fairlock-shared",
		Settings:   "fairlock (this repo), one Locker and one client shared by every worker of a process, WithLeaseTTL(lease)",
		Redis:      true,
		Concurrent: true,
		New:        shared.worker,
	}
}

// sharedLocker is the Locker a fairlock-shared worker set shares: opened
// by its first worker, closed by its last.
type sharedLocker struct {
	mu    sync.Mutex
	users int
	w     *fairlockWorker
}

// sharedWorker is one worker's handle on the shared Locker.
type sharedWorker struct {
	*fairlockWorker
	owner *sharedLocker
}

func (s *sharedLocker) worker(e *env, c *counters) (worker, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		w, err := newFairlockWorker(e, c)
		if err != nil {
			return nil, err
		}
		s.w = w
	}
	s.users++
	return sharedWorker{s.w, s}, nil
}

func (w sharedWorker) Close() error {
	s := w.owner
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.users--; s.users > 0 {
		return nil
	}
	err := s.w.Close()
	s.w = nil
	return err
}

func init() {
	// Each script by its file, the semaphore's and read-write lock's (the
	// counted holder store) as "counted-<file>".
	for prefix, set := range map[string]scripts.Set{"": scripts.Mutex, "counted-": scripts.Counted} {
		for name, src := range map[string]string{
			"acquire": set.Acquire, "release": set.Release, "cancel": set.Cancel, "extend": set.Extend,
			"heartbeat": set.Heartbeat, "inspect": set.Snapshot, "force-release": set.ForceRelease,
		} {
			nameScript(prefix+name, redis.NewScript(src))
		}
	}
}
