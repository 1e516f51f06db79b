//go:build fairlock

package main

import (
	"context"
	"sync/atomic"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/scripts"
	"github.com/redis/go-redis/v9"
)

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
	st, err := w.l.Inspect(ctx, name)
	return st.Waiters, err
}

func (w *fairlockWorker) Semaphore(ctx context.Context, name string, capacity, n int) (taken, error) {
	s, err := w.l.Semaphore(name, capacity)
	if err != nil {
		return taken{}, err
	}
	var q queuedAt
	lease, err := s.Acquire(ctx, n, fairlock.OnQueued(q.note))
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
	s, err := w.l.Semaphore(name, 1) // Inspect does not depend on the capacity
	if err != nil {
		return 0, err
	}
	st, err := s.Inspect(ctx)
	return st.Waiters, err
}

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
	cl := newRedisClient(e.RedisAddr, c)
	l, err := fairlock.New(cl, fairlock.WithLeaseTTL(e.LeaseTTL))
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
		KindSettings: "Locker.Semaphore(name, capacity).Acquire(ctx, n) and Locker.RWMutex(name).RLock/Lock, with OnQueued to note when the call joined the queue; the lease's Fence gives the grant order",
	}
}

func init() {
	for name, src := range map[string]string{
		"acquire": scripts.Acquire, "release": scripts.Release, "cancel": scripts.Cancel,
		"extend": scripts.Extend, "heartbeat": scripts.Heartbeat, "inspect": scripts.Inspect,
		"seed":            scripts.Seed,
		"counted-acquire": scripts.CountedAcquire, "counted-release": scripts.CountedRelease,
		"counted-cancel": scripts.CountedCancel, "counted-extend": scripts.CountedExtend,
		"counted-heartbeat": scripts.CountedHeartbeat, "census": scripts.Census,
	} {
		nameScript(name, redis.NewScript(src))
	}
}
