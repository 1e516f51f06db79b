package fairlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"
)

// A MultiMutex holds several mutexes at once, all or none: a transfer
// between two accounts locks both. Taken one by one in the order each
// caller names them, A then B and B then A deadlock, and fair queues make
// it worse, since nobody times out of a queue early.
//
// On one Redis node (a client of one server, or Sentinel's), Acquire
// queues one request in every mutex's queue at once, in one MULTI/EXEC:
// any two MultiMutex requests stand in the same order in every queue they
// share, so no cycle of waits can form, whatever order the names were
// given in. The request keeps its place in each queue, so a stream of
// single requests cannot pass it, and it waits in all its queues at once:
// its wait is the longest of its mutexes' FIFO bounds. It may be granted
// one mutex before the others, and holds it until it has them all.
//
// On Redis Cluster each lock name is a hash tag of its own, so two mutexes
// share a slot only by chance, and mutexes in different slots cannot share
// a transaction. There Acquire takes the mutexes slot by slot, in one order
// for every caller (Names: by slot, then by name, byte by byte): those of
// one slot as one request, queued in each of their queues at once, and the
// next slot's only once it holds them. That cannot deadlock either: a
// request waits in one slot at a time and holds only mutexes of that slot
// or of earlier ones. It costs more: while it waits in a later slot it
// holds the mutexes of the earlier ones, and its wait is at most the sum of
// its slots' FIFO bounds. TryAcquire takes the mutexes one by one, in that
// order, everywhere.
//
// A MultiMutex's Acquire takes no WithPriority (ErrInvalid): priorities
// and their aging could order two requests one way in one queue and the
// other way in another.
//
// Each call's request to each mutex is a waiter, then a holder, of that
// mutex, labelled as a part of the call's request: Inspect shows the same
// Holder.Multi (Waiter.Multi) in each of its queues, and its events carry
// it as Event.Multi.
//
// A MultiMutex is safe for concurrent use, and costs nothing to make.
type MultiMutex struct {
	locker   *Locker
	mutexes  []*Mutex   // in the order they are taken
	requests [][]*Mutex // mutexes, cut into the requests Acquire queues at once
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
	m.requests = m.cut()
	return m, nil
}

// cut cuts m's mutexes, sorted by name, into the requests Acquire
// queues one after another, each in all its mutexes' queues at once, and
// puts m's mutexes in that order: all in one request on one node (a client
// of one server, or of Sentinel's primary); on Cluster, one request per
// slot, by slot; one per mutex on any other client, which promises no
// transaction.
func (m *MultiMutex) cut() [][]*Mutex {
	switch m.locker.client.(type) {
	case *redis.Client:
		return [][]*Mutex{m.mutexes}
	case *redis.ClusterClient:
		slot := func(mu *Mutex) int { return keySlot(mu.req.ref.keys[0]) }
		slices.SortStableFunc(m.mutexes, func(a, b *Mutex) int { return cmp.Compare(slot(a), slot(b)) })
		return slices.Collect(chunkBy(m.mutexes, slot))
	}
	return slices.Collect(slices.Chunk(m.mutexes, 1))
}

// chunkBy yields the runs of s whose elements have the same key.
func chunkBy[E any](s []E, key func(E) int) iter.Seq[[]E] {
	return func(yield func([]E) bool) {
		for len(s) > 0 {
			n := 1
			for n < len(s) && key(s[n]) == key(s[0]) {
				n++
			}
			if !yield(s[:n:n]) {
				return
			}
			s = s[n:]
		}
	}
}

// Names are the mutexes' names, in the order they are taken.
func (m *MultiMutex) Names() []string {
	names := make([]string, len(m.mutexes))
	for i, mu := range m.mutexes {
		names[i] = mu.Name()
	}
	return names
}

// Acquire waits until it holds every mutex, each in FIFO order among its
// waiters (see MultiMutex for how), and returns the lease of all. If ctx
// ends or a mutex's request fails first, it releases what it took and
// leaves every queue, and returns the error (matching ctx.Err() if ctx
// ended). opts apply to each mutex's request (OnQueued reports each queue
// it joins); WithPriority is ErrInvalid.
func (m *MultiMutex) Acquire(ctx context.Context, opts ...AcquireOption) (*MultiLease, error) {
	var cfg acquireConfig
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	if cfg.priority > 0 {
		return nil, fmt.Errorf("%w: a MultiMutex takes no priority: its request must stand in the same order in every queue", ErrInvalid)
	}
	opts = m.partsOf(opts)
	return m.take(ctx, m.requests, func(mutexes []*Mutex) ([]*Lease, error) {
		if len(mutexes) == 1 {
			lease, err := mutexes[0].Acquire(ctx, opts...)
			return []*Lease{lease}, err
		}
		return acquireTogether(ctx, mutexes, opts)
	})
}

// TryAcquire takes every mutex only if each is free with nobody waiting
// when its turn comes; otherwise it releases what it took and returns
// ErrNotAcquired. It never waits and never jumps a queue.
func (m *MultiMutex) TryAcquire(ctx context.Context, opts ...AcquireOption) (*MultiLease, error) {
	opts = m.partsOf(opts)
	return m.take(ctx, slices.Collect(slices.Chunk(m.mutexes, 1)), func(mutexes []*Mutex) ([]*Lease, error) {
		lease, err := mutexes[0].TryAcquire(ctx, opts...)
		return []*Lease{lease}, err
	})
}

// partsOf adds to opts the tag that marks each mutex's request as a part
// of one request (Holder.Multi), fresh for each call.
func (m *MultiMutex) partsOf(opts []AcquireOption) []AcquireOption {
	tag := m.locker.books.multiTag()
	return append(slices.Clip(opts), func(c *acquireConfig) { c.multi = tag })
}

// Do runs fn while holding every mutex, then releases them, on every way
// out of fn, a panic included. fn's context is cancelled, with cause
// ErrLost, if any lease is lost; then the error matches ErrLost, joined
// with fn's own error. A nil fn is ErrInvalid, and takes nothing.
func (m *MultiMutex) Do(ctx context.Context, fn func(ctx context.Context) error, opts ...AcquireOption) error {
	return do(ctx, m.locker.cfg.leaseTTL, fn, func() (*MultiLease, error) { return m.Acquire(ctx, opts...) })
}

// take takes each request's mutexes with acquire, one request after
// another; on an error it gives back what it took, with a context of its
// own, so that an ended ctx cannot keep a mutex from passing on.
func (m *MultiMutex) take(ctx context.Context, requests [][]*Mutex, acquire func([]*Mutex) ([]*Lease, error)) (*MultiLease, error) {
	ml := &MultiLease{}
	for _, mutexes := range requests {
		leases, err := acquire(mutexes)
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.locker.cfg.leaseTTL)
			defer cancel()
			if rerr := ml.Release(rctx); rerr != nil && !errors.Is(rerr, ErrNotHeld) {
				err = errors.Join(err, rerr)
			}
			return nil, err
		}
		ml.leases = append(ml.leases, leases...)
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
