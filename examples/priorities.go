package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fairlock/fairlock/examples/internal/contention"
	"github.com/fairlock/fairlock/examples/internal/exampleredis"
	"github.com/fairlock/fairlock/fairlock"
)

const (
	prioritiesPrefix = "example-priorities"
	name             = "renderer"            // the semaphore both kinds of work share
	capacity         = 2                     // jobs that may run at once
	job              = 20 * time.Millisecond // how long a job holds its permit
	backlog          = 6                     // batch jobs queued behind the ones running
	urgent           = 2                     // interactive requests that arrive after them
	interactive      = fairlock.MaxPriority  // the interactive requests' priority
	aging            = 25 * time.Millisecond // the batch runner's aging in the second part
	streamers        = 2 * capacity          // interactive requests at once in the second part
)

// priorities shows interactive and batch work on one Semaphore: a
// backlog of batch jobs waits in line, and interactive requests that ask
// with fairlock.WithPriority(9) start ahead of it, at the next free permit,
// instead of waiting behind it. Aging keeps the batch jobs from waiting
// forever: a waiter rises one priority for each aging it has waited
// (fairlock.WithPriorityAging), so even behind a stream of interactive
// requests a batch job starts within 9 agings.
//
// The batch runner and the interactive service are goroutines, each with
// its own Redis client and Locker, which is what separate processes would
// have.
//
//	go run ./examples priorities
func priorities(ctx context.Context, w io.Writer, rdb *exampleredis.Redis) error {
	fmt.Fprintln(w, "using", rdb)
	// The batch runner's Locker and the interactive service's. The batch
	// runner's keeps the default aging, 30s: its jobs here wait far less,
	// so none rises.
	lockers, err := contention.NewLockers(rdb, 2, fairlock.WithKeyPrefix(prioritiesPrefix))
	if err != nil {
		return err
	}
	defer lockers.Close()
	batch, service := lockers[0], lockers[1]
	if err := passing(ctx, w, batch, service); err != nil {
		return err
	}

	// A batch runner whose waiters rise a priority every aging.
	aged, err := contention.NewLockers(rdb, 1, fairlock.WithKeyPrefix(prioritiesPrefix), fairlock.WithPriorityAging(aging))
	if err != nil {
		return err
	}
	defer aged.Close()
	return stream(ctx, w, aged[0], service)
}

// jobRun is what passing saw of one job.
type jobRun struct {
	name     string
	priority int
	arrived  int   // 1 for the first to reach the semaphore
	fence    int64 // grant order, which is the order the jobs started
	waited   time.Duration
}

// passing: the batch runner's first jobs take every permit and more queue
// behind them; then interactive requests arrive. The jobs running hold
// their permits until every job has reached the semaphore, so that all are
// in line when the first permit frees; then each runs for a job's time. The
// interactive requests start at the first free permits, ahead of the
// batch jobs that came before them, which then start in the order they
// arrived.
func passing(ctx context.Context, w io.Writer, batch, service *fairlock.Locker) error {
	batchSem, err := batch.Semaphore(name, capacity)
	if err != nil {
		return err
	}
	serviceSem, err := service.Semaphore(name, capacity)
	if err != nil {
		return err
	}
	var (
		mu    sync.Mutex // guards runs
		runs  []jobRun
		line  contention.Arrivals
		allIn = make(chan struct{})
	)
	arrive := func(sem *fairlock.Semaphore, j jobRun) {
		line.Arrive(func(reached func(int)) error {
			asked := time.Now()
			lease, err := sem.Acquire(ctx, 1, fairlock.WithPriority(j.priority), fairlock.OnQueued(reached))
			reached(0)
			if err != nil {
				return err
			}
			j.fence, j.waited = lease.Fence(), time.Since(asked)
			mu.Lock()
			runs = append(runs, j)
			mu.Unlock()
			return work(ctx, lease, allIn)
		})
	}
	fmt.Fprintf(w, "%d jobs run at once on one semaphore, each for %v. The batch runner's first %d jobs take the permits\n"+
		"and %d more queue behind them; then %d interactive requests arrive with fairlock.WithPriority(%d):\n",
		capacity, job, capacity, backlog, urgent, interactive)
	var arrived []string
	for i := range capacity + backlog + urgent {
		j, sem := jobRun{name: fmt.Sprintf("batch-%d", i+1), arrived: i + 1}, batchSem
		if i >= capacity+backlog {
			j.name, j.priority, sem = fmt.Sprintf("interactive-%d", i+1-capacity-backlog), interactive, serviceSem
		}
		arrived = append(arrived, j.name)
		arrive(sem, j)
	}
	close(allIn)
	if err := line.Wait(); err != nil {
		return err
	}

	slices.SortFunc(runs, func(a, b jobRun) int { return cmp.Compare(a.fence, b.fence) })
	table := contention.Table{-6, -14, -9, -8}
	table.Row(w, "start", "job", "priority", "arrived", "waited")
	var (
		order                    []string
		queuedWaits, urgentWaits []time.Duration // of the batch jobs that queued, and of the interactive requests
	)
	for i, r := range runs {
		table.Row(w, i+1, r.name, r.priority, r.arrived, r.waited.Round(time.Millisecond))
		order = append(order, r.name)
		switch {
		case r.priority == interactive:
			urgentWaits = append(urgentWaits, r.waited)
		case r.arrived > capacity:
			queuedWaits = append(queuedWaits, r.waited)
		}
	}
	fmt.Fprintf(w, "started in the order: %s\n", strings.Join(order, " "))
	fmt.Fprintf(w, "the interactive requests waited at most %v, for the running jobs to end; the queued batch jobs %v to %v\n",
		slices.Max(urgentWaits).Round(time.Millisecond), slices.Min(queuedWaits).Round(time.Millisecond), slices.Max(queuedWaits).Round(time.Millisecond))
	// The batch jobs that took the permits at once, then the interactive
	// requests, then the batch backlog, each in arrival order.
	want := append(arrived[:capacity:capacity], arrived[capacity+backlog:]...)
	want = append(want, arrived[capacity:capacity+backlog]...)
	if !slices.Equal(order, want) {
		return fmt.Errorf("jobs started in the order %v, want %v", order, want)
	}
	return nil
}

// work runs a job under lease: it waits until start is closed, runs for
// job, and gives the permit back.
func work(ctx context.Context, lease *fairlock.Lease, start <-chan struct{}) error {
	select {
	case <-start:
	case <-ctx.Done():
	}
	time.Sleep(job)
	return lease.Release(ctx)
}

// stream: the interactive service keeps streamers requests at once in line
// for the capacity permits, each asking again as soon as its job ends, so
// that at every release an interactive request waits. A batch job that
// asks meanwhile would never start if priorities were absolute; its Locker
// ages its waiters, so after 9 agings it ranks with the interactive
// requests, and having come before those that wait, starts next.
func stream(ctx context.Context, w io.Writer, batch, service *fairlock.Locker) error {
	interactiveSem, err := service.Semaphore(name, capacity)
	if err != nil {
		return err
	}
	batchSem, err := batch.Semaphore(name, capacity)
	if err != nil {
		return err
	}
	streamCtx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		started atomic.Int64 // interactive jobs started
		wg      sync.WaitGroup
		inLine  sync.WaitGroup // the streamers that have reached the semaphore
		mu      sync.Mutex     // guards errs
		errs    []error
	)
	inLine.Add(streamers)
	for range streamers {
		joined := sync.OnceFunc(inLine.Done)
		wg.Go(func() {
			defer joined() // in case it failed before it reached the semaphore
			for streamCtx.Err() == nil {
				lease, err := interactiveSem.Acquire(streamCtx, 1, fairlock.WithPriority(interactive), fairlock.OnQueued(func(int) { joined() }))
				joined()
				switch {
				case err == nil:
					started.Add(1)
					time.Sleep(job)
					err = lease.Release(ctx)
				case streamCtx.Err() != nil:
					return // the stream has stopped
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	inLine.Wait()

	before := started.Load()
	asked := time.Now()
	lease, err := batchSem.Acquire(ctx, 1)
	waited, passed := time.Since(asked), started.Load()-before
	stop()
	wg.Wait()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if err := lease.Release(ctx); err != nil {
		return err
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%d interactive requests at a time ask for the %d permits, each again as soon as its job ends;\n"+
		"a batch job asks meanwhile, from a Locker made with fairlock.WithPriorityAging(%v):\n", streamers, capacity, aging)
	fmt.Fprintf(w, "  the batch job waited %v while %d interactive jobs started; after %d agings (%v) it ranks with them\n"+
		"  and, having come first, starts next\n", waited.Round(time.Millisecond), passed, interactive, interactive*aging)
	return nil
}
