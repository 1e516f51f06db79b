package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/fairlock/fairlock/examples/internal/contention"
	"github.com/fairlock/fairlock/examples/internal/exampleredis"
	"github.com/fairlock/fairlock/fairlock"
)

const (
	limitPrefix = "example-customerlimit"
	limit       = 2 // jobs of one customer that may run at once
)

// customerlimit shows a per-customer concurrency limit: at most two
// jobs of one customer run at once, started in the order they arrived,
// with fairlock's Semaphore; and, for contrast, a spinning semaphore that
// keeps the limit too but lets some workers starve.
//
// The workers are goroutines, each with its own Redis client and its own
// fairlock.Locker, which is what separate processes would have.
//
//	go run ./examples customerlimit
func customerlimit(ctx context.Context, w io.Writer, rdb *exampleredis.Redis) error {
	fmt.Fprintln(w, "using", rdb)

	lockers, err := contention.NewLockers(rdb, limitContenders, fairlock.WithKeyPrefix(limitPrefix))
	if err != nil {
		return err
	}
	defer lockers.Close()
	if err := inArrivalOrder(ctx, w, lockers[:3]); err != nil {
		return err
	}

	load := contention.Load{Workers: limitContenders, Grants: jobs, Hold: limitHold}
	fair, err := load.Run(ctx, func(i int) contention.Acquire {
		sem, err := lockers[i].Semaphore("customer:hot", limit)
		if err != nil {
			panic(err) // the name and capacity are constants
		}
		return fairSemaphore{sem}.acquire
	})
	if err != nil {
		return err
	}
	spin, err := load.Run(ctx, func(int) contention.Acquire {
		return spinSemaphore{rdb: rdb.Client, key: limitPrefix + ":spin:hot", capacity: limit, ttl: time.Second, retry: spinRetry}.acquire
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%d workers run one customer's jobs, at most %d at once, until %d have started;\n"+
		"each job takes %v and each worker wants the next at once; the spinning semaphore retries every %v:\n",
		limitContenders, limit, jobs, limitHold, spinRetry)
	table := contention.Table{-10, -22, -13}
	table.Row(w, "", "jobs per worker", "longest wait", "most at once")
	table.Row(w, "fairlock", fair.Counts(), fair.Worst().Round(time.Millisecond), fair.Most)
	table.Row(w, "spinning", spin.Counts(), spin.Worst().Round(time.Millisecond), spin.Most)
	// FIFO hands the permits round-robin, so every worker gets about the same
	// share; allow for a worker that a busy machine slows between a release
	// and its next ask.
	if slices.Min(fair.Grants()) < jobs/limitContenders/2 {
		return fmt.Errorf("fairlock starved a worker: %v", fair.Grants())
	}
	if fair.Most > limit || spin.Most > limit {
		return fmt.Errorf("over the limit of %d: fairlock ran %d at once, the spinning semaphore %d", limit, fair.Most, spin.Most)
	}
	return nil
}

// inArrivalOrder: jobs for two customers arrive one after another at three
// workers. A worker takes a permit of the customer's semaphore before it
// runs a job, so at most limit jobs of a customer run at once, and because
// the semaphore grants in FIFO order, they start in the order they arrived.
// Each customer has a semaphore of its own: a queue of one customer's jobs
// does not hold up another's.
func inArrivalOrder(ctx context.Context, w io.Writer, workers []*fairlock.Locker) error {
	const (
		arrivals = 12
		runs     = 20 * time.Millisecond
	)
	var mu sync.Mutex // guards what the jobs record of their customer
	customers := map[string]*customerJobs{"acme": {}, "globex": {}}
	customer := func(job int) string { return []string{"acme", "acme", "globex"}[(job-1)%3] }
	fmt.Fprintf(w, "%d jobs for 2 customers arrive at %d workers; each customer may run %d at once, and a job takes %v:\n",
		arrivals, len(workers), limit, runs)
	// The next job arrives only after this one has reached the semaphore
	// (queued, or granted at once): arrival order is certain.
	var line contention.Arrivals
	for job := 1; job <= arrivals; job++ {
		c := customers[customer(job)]
		c.arrived = append(c.arrived, job)
		sem, err := workers[(job-1)%len(workers)].Semaphore("customer:"+customer(job), limit)
		if err != nil {
			return err
		}
		line.Arrive(func(reached func(int)) error {
			asked := time.Now()
			lease, err := sem.Acquire(ctx, 1, fairlock.OnQueued(reached))
			reached(0)
			if err != nil {
				return err
			}
			mu.Lock()
			c.started = append(c.started, start{job, lease.Fence()})
			c.waited = max(c.waited, time.Since(asked))
			c.running++
			c.most = max(c.most, c.running)
			mu.Unlock()
			time.Sleep(runs)
			mu.Lock()
			c.running--
			mu.Unlock()
			return lease.Release(ctx)
		})
	}
	if err := line.Wait(); err != nil {
		return err
	}
	for _, name := range []string{"acme", "globex"} {
		if err := customers[name].report(w, name); err != nil {
			return err
		}
	}
	return nil
}

// customerJobs is what inArrivalOrder saw of one customer's jobs.
type customerJobs struct {
	arrived       []int
	started       []start
	running, most int           // jobs running, and the most that ran at once
	waited        time.Duration // the longest wait for a permit
}

type start struct {
	job   int
	fence int64
}

// report prints the customer's jobs in the order they started, and checks
// that it was the order they arrived in and that they kept the limit.
func (c *customerJobs) report(w io.Writer, name string) error {
	// Fences follow grant order, which is the order the jobs started.
	slices.SortFunc(c.started, func(a, b start) int { return cmp.Compare(a.fence, b.fence) })
	var order []int
	for _, s := range c.started {
		order = append(order, s.job)
	}
	fmt.Fprintf(w, "  %-6s arrived %v\n         started %v, at most %d at once, longest wait %v\n",
		name, c.arrived, order, c.most, c.waited.Round(time.Millisecond))
	if !slices.Equal(c.arrived, order) {
		return fmt.Errorf("%s: jobs started out of arrival order", name)
	}
	if c.most > limit {
		return fmt.Errorf("%s: %d jobs ran at once, over the limit of %d", name, c.most, limit)
	}
	return nil
}

const (
	limitContenders = 6
	jobs            = 120
	limitHold       = 2 * time.Millisecond
)

type fairSemaphore struct{ sem *fairlock.Semaphore }

// acquire is a contention.Acquire: the caller is in line once it has
// queued; one granted a permit at once is in line by then too.
func (s fairSemaphore) acquire(ctx context.Context, inLine func()) (func(context.Context) error, error) {
	lease, err := s.sem.Acquire(ctx, 1, fairlock.OnQueued(func(int) { inLine() }))
	if err != nil {
		return nil, err
	}
	return lease.Release, nil
}
