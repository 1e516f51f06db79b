// Command customerlimit shows a per-customer concurrency limit: at most two
// jobs of one customer run at once, started in the order they arrived,
// with fairlock's Semaphore; and, for contrast, a spinning semaphore that
// keeps the limit too but lets some workers starve.
//
// The workers are goroutines, each with its own Redis client and its own
// fairlock.Locker, which is what separate processes would have.
//
//	go run ./examples/customerlimit
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

	"github.com/fairlock/fairlock/examples/internal/exampleredis"
	"github.com/fairlock/fairlock/fairlock"
)

const (
	prefix = "example-customerlimit"
	limit  = 2 // jobs of one customer that may run at once
)

func main() { exampleredis.Main(run) }

// run is the example; exampleredis.Main opens rdb and passes it in.
func run(ctx context.Context, w io.Writer, rdb *exampleredis.Redis) error {
	fmt.Fprintln(w, "using", rdb)

	lockers := make([]*fairlock.Locker, contenders)
	for i := range lockers {
		l, err := fairlock.New(rdb.NewClient(), fairlock.WithKeyPrefix(prefix))
		if err != nil {
			return err
		}
		defer l.Close()
		lockers[i] = l
	}
	if err := inArrivalOrder(ctx, w, lockers[:3]); err != nil {
		return err
	}

	fair, err := contend(ctx, func(i int) semaphore {
		sem, err := lockers[i].Semaphore("customer:hot", limit)
		if err != nil {
			panic(err) // the name and capacity are constants
		}
		return fairSemaphore{sem}
	})
	if err != nil {
		return err
	}
	spin, err := contend(ctx, func(int) semaphore {
		return spinSemaphore{rdb: rdb.Client, key: prefix + ":spin:hot", capacity: limit, ttl: time.Second, retry: spinRetry}
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%d workers run one customer's jobs, at most %d at once, until %d have started;\n"+
		"each job takes %v and each worker wants the next at once; the spinning semaphore retries every %v:\n",
		contenders, limit, jobs, hold, spinRetry)
	fmt.Fprintf(w, "  %-10s %-22s %-13s %s\n", "", "jobs per worker", "longest wait", "most at once")
	for _, r := range []struct {
		name string
		c    contention
	}{{"fairlock", fair}, {"spinning", spin}} {
		counts := strings.Trim(fmt.Sprint(r.c.grants), "[]")
		fmt.Fprintf(w, "  %-10s %-22s %-13v %d\n", r.name, counts, r.c.maxWait.Round(time.Millisecond), r.c.most)
	}
	// FIFO hands the permits round-robin, so every worker gets about the same
	// share; allow for a worker that a busy machine slows between a release
	// and its next ask.
	if slices.Min(fair.grants) < jobs/contenders/2 {
		return fmt.Errorf("fairlock starved a worker: %v", fair.grants)
	}
	if fair.most > limit || spin.most > limit {
		return fmt.Errorf("over the limit of %d: fairlock ran %d at once, the spinning semaphore %d", limit, fair.most, spin.most)
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
	type start struct {
		job   int
		fence int64
	}
	var (
		mu      sync.Mutex
		arrived = map[string][]int{}
		started = map[string][]start{}
		running = map[string]int{}
		most    = map[string]int{}
		waited  = map[string]time.Duration{}
	)
	customer := func(job int) string { return []string{"acme", "acme", "globex"}[(job-1)%3] }
	fmt.Fprintf(w, "%d jobs for 2 customers arrive at %d workers; each customer may run %d at once, and a job takes %v:\n",
		arrivals, len(workers), limit, runs)
	errs := make(chan error, arrivals)
	for job := 1; job <= arrivals; job++ {
		c := customer(job)
		arrived[c] = append(arrived[c], job)
		sem, err := workers[(job-1)%len(workers)].Semaphore("customer:"+c, limit)
		if err != nil {
			return err
		}
		// The next job arrives only after this one has reached the
		// semaphore (queued, or granted at once): arrival order is certain.
		in := make(chan struct{})
		var once sync.Once
		reached := func(int) { once.Do(func() { close(in) }) }
		go func() {
			asked := time.Now()
			lease, err := sem.Acquire(ctx, 1, fairlock.OnQueued(reached))
			reached(0)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			started[c] = append(started[c], start{job, lease.Fence()})
			waited[c] = max(waited[c], time.Since(asked))
			running[c]++
			most[c] = max(most[c], running[c])
			mu.Unlock()
			time.Sleep(runs)
			mu.Lock()
			running[c]--
			mu.Unlock()
			errs <- lease.Release(ctx)
		}()
		<-in
	}
	for range arrivals {
		if err := <-errs; err != nil {
			return err
		}
	}
	for _, c := range []string{"acme", "globex"} {
		// Fences follow grant order, which is the order the jobs started.
		slices.SortFunc(started[c], func(a, b start) int { return cmp.Compare(a.fence, b.fence) })
		var order []int
		for _, s := range started[c] {
			order = append(order, s.job)
		}
		fmt.Fprintf(w, "  %-6s arrived %v\n         started %v, at most %d at once, longest wait %v\n",
			c, arrived[c], order, most[c], waited[c].Round(time.Millisecond))
		if !slices.Equal(arrived[c], order) {
			return fmt.Errorf("%s: jobs started out of arrival order", c)
		}
		if most[c] > limit {
			return fmt.Errorf("%s: %d jobs ran at once, over the limit of %d", c, most[c], limit)
		}
	}
	return nil
}

const (
	contenders = 6
	jobs       = 120
	hold       = 2 * time.Millisecond
	spinRetry  = 20 * time.Millisecond // a common retry delay, as in orderedjobs
)

// semaphore is what contend needs: take a permit, get the way to give it
// back. acquire calls inLine once the caller has its place in line.
type semaphore interface {
	acquire(ctx context.Context, inLine func()) (release func(context.Context) error, err error)
}

type fairSemaphore struct{ sem *fairlock.Semaphore }

// acquire's caller is in line once it has queued, or got a permit at once.
func (s fairSemaphore) acquire(ctx context.Context, inLine func()) (func(context.Context) error, error) {
	lease, err := s.sem.Acquire(ctx, 1, fairlock.OnQueued(func(int) { inLine() }))
	if err != nil {
		return nil, err
	}
	inLine()
	return lease.Release, nil
}

type contention struct {
	grants  []int         // jobs started per worker
	maxWait time.Duration // longest any worker waited, counting a wait cut off at the end
	most    int64         // most jobs running at once
}

// contend runs workers that each take a permit, run a job for hold, give
// the permit back and immediately want another, until jobs have started.
// Jobs count once every worker is in line: a worker that a busy machine
// started late was not starved by the semaphore.
func contend(ctx context.Context, newSemaphore func(worker int) semaphore) (contention, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		total, running atomic.Int64
		inLine         atomic.Int64 // workers in line
		mu             sync.Mutex
		res            = contention{grants: make([]int, contenders)}
		wg             sync.WaitGroup
		errs           = make(chan error, contenders)
	)
	for i := range contenders {
		sem := newSemaphore(i)
		joined := sync.OnceFunc(func() { inLine.Add(1) })
		wg.Go(func() {
			for {
				start := time.Now()
				release, err := sem.acquire(ctx, joined)
				waited := time.Since(start)
				mu.Lock()
				res.maxWait = max(res.maxWait, waited)
				mu.Unlock()
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				var n int64 // 0 for a job that does not count
				if inLine.Load() == contenders {
					n = total.Add(1)
				}
				if n <= jobs {
					now := running.Add(1)
					mu.Lock()
					if n > 0 {
						res.grants[i]++
					}
					res.most = max(res.most, now)
					mu.Unlock()
					time.Sleep(hold)
					running.Add(-1)
				}
				if err := release(context.WithoutCancel(ctx)); err != nil {
					errs <- err
					return
				}
				if n >= jobs {
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return res, errors.Join(all...)
}
