package fairlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// A MultiMutex holds several mutexes at once, all or none: a transfer
// between two accounts locks both. Taken one by one in the order each
// caller names them, A then B and B then A deadlock, and fair queues make
// it worse, since nobody times out of a queue early. A MultiMutex takes
// its mutexes in one order for every caller, whatever order they were
// named in (by name, byte by byte), so no two callers can each hold what
// the other waits for: no deadlock among MultiMutexes, nor with single
// Acquires. Each mutex is taken as Mutex.Acquire takes it, in FIFO order,
// so a stream of single requests cannot pass a MultiMutex's request in
// any queue, and its wait is at most the sum of its mutexes' FIFO bounds.
//
// What it costs: while it waits for a later mutex it holds the earlier
// ones, so their waiters wait too, for as long as that later queue takes
// (a bounded wait, never a deadlock). Taking them as one request, queued
// in every queue at once, would hold nothing while waiting; it needs every
// name on one Redis node, which Redis Cluster gives only to names that
// share a slot, and fairlock does not do it yet.
//
// A MultiMutex is safe for concurrent use, and costs nothing to make.
type MultiMutex struct {
	locker  *Locker
	mutexes []*Mutex // in the order they are taken
}

// MultiMutex returns the mutexes called names, to be held together. It
// checks the names (at least one, none listed twice) but does not contact
// Redis.
func (l *Locker) MultiMutex(names ...string) (*MultiMutex, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: a MultiMutex of no lock", ErrInvalid)
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	m := &MultiMutex{locker: l}
	for i, name := range sorted {
		if i > 0 && name == sorted[i-1] {
			return nil, fmt.Errorf("%w: lock name %s listed twice", ErrInvalid, quoteName(name))
		}
		mu, err := l.Mutex(name)
		if err != nil {
			return nil, err
		}
		m.mutexes = append(m.mutexes, mu)
	}
	return m, nil
}

// Names are the mutexes' names, in the order they are taken.
func (m *MultiMutex) Names() []string {
	names := make([]string, len(m.mutexes))
	for i, mu := range m.mutexes {
		names[i] = mu.Name()
	}
	return names
}

// Acquire waits until it holds every mutex, taking them in Names' order,
// each in FIFO order among its waiters, and returns the lease of all. If
// ctx ends or a mutex's Acquire fails first, it releases what it took and
// leaves every queue, and returns the error (matching ctx.Err() if ctx
// ended). opts apply to each mutex's Acquire (OnQueued reports each queue
// it joins).
func (m *MultiMutex) Acquire(ctx context.Context, opts ...AcquireOption) (*MultiLease, error) {
	return m.take(ctx, func(mu *Mutex) (*Lease, error) { return mu.Acquire(ctx, opts...) })
}

// TryAcquire takes every mutex only if each is free with nobody waiting
// when its turn comes; otherwise it releases what it took and returns
// ErrNotAcquired. It never waits and never jumps a queue.
func (m *MultiMutex) TryAcquire(ctx context.Context, opts ...AcquireOption) (*MultiLease, error) {
	return m.take(ctx, func(mu *Mutex) (*Lease, error) { return mu.TryAcquire(ctx, opts...) })
}

// Do runs fn while holding every mutex, then releases them, on every way
// out of fn, a panic included. fn's context is cancelled, with cause
// ErrLost, if any lease is lost; then the error matches ErrLost, joined
// with fn's own error. A nil fn is ErrInvalid, and takes nothing.
func (m *MultiMutex) Do(ctx context.Context, fn func(ctx context.Context) error, opts ...AcquireOption) error {
	return do(ctx, m.locker.cfg.leaseTTL, fn, func() (*MultiLease, error) { return m.Acquire(ctx, opts...) })
}

// take takes each mutex with acquire, in order; on an error it gives back
// what it took, with a context of its own, so that an ended ctx cannot
// keep a mutex from passing on.
func (m *MultiMutex) take(ctx context.Context, acquire func(*Mutex) (*Lease, error)) (*MultiLease, error) {
	ml := &MultiLease{}
	for _, mu := range m.mutexes {
		lease, err := acquire(mu)
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.locker.cfg.leaseTTL)
			defer cancel()
			if rerr := ml.Release(rctx); rerr != nil && !errors.Is(rerr, ErrNotHeld) {
				err = errors.Join(err, rerr)
			}
			return nil, err
		}
		ml.leases = append(ml.leases, lease)
	}
	return ml, nil
}

// A MultiLease is the lease of every mutex of a MultiMutex: one lease per
// mutex, each with its own fence. It ends when any of them ends; Release
// frees all.
type MultiLease struct {
	leases []*Lease // in the order they were taken

	doneOnce sync.Once
	done     chan struct{}
}

// Leases are the leases of the mutexes, in the order they were taken
// (MultiMutex.Names): pass each one's Fence to the storage its mutex
// guards.
func (ml *MultiLease) Leases() []*Lease { return slices.Clone(ml.leases) }

// Fence is the fence of the lease of the mutex called name, 0 if it is
// none of them.
func (ml *MultiLease) Fence(name string) int64 {
	for _, ls := range ml.leases {
		if ls.Name() == name {
			return ls.Fence()
		}
	}
	return 0
}

// Done is closed when any of the leases ends, for any reason.
func (ml *MultiLease) Done() <-chan struct{} {
	ml.doneOnce.Do(func() {
		ml.done = make(chan struct{})
		var closeOnce sync.Once
		for _, ls := range ml.leases {
			go func() {
				<-ls.Done()
				closeOnce.Do(func() { close(ml.done) })
			}()
		}
	})
	return ml.done
}

// Err is nil while every lease is held; ErrLost if any was lost;
// otherwise the first lease's error (ErrReleased after Release).
func (ml *MultiLease) Err() error {
	var first error
	for _, ls := range ml.leases {
		err := ls.Err()
		if errors.Is(err, ErrLost) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// Release frees every mutex still held, the last taken first, each as
// Lease.Release does (handing it to its next waiter). It returns the
// errors of the releases joined, ErrNotHeld among them for a lease
// released or lost before.
func (ml *MultiLease) Release(ctx context.Context) error {
	var errs []error
	for _, ls := range slices.Backward(ml.leases) {
		if err := ls.Release(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", quoteName(ls.Name()), err))
		}
	}
	return errors.Join(errs...)
}
