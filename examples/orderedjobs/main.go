// Command orderedjobs shows a fair lock serving per-customer jobs in the
// order they arrived, and, for contrast, a spin lock starving its workers.
//
// The workers are goroutines, each with its own Redis client and its own
// fairlock.Locker, which is exactly what separate processes would have; it
// keeps the example one `go run` and its test fast. Run them as processes
// against a real server and nothing changes.
//
//	go run ./examples/orderedjobs
package main

import (
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

const prefix = "example-orderedjobs"

func main() { exampleredis.Main(run) }

// run is the example; exampleredis.Main opens rdb and passes it in.
func run(ctx context.Context, w io.Writer, rdb *exampleredis.Redis) error {
	fmt.Fprintln(w, "using", rdb)

	lockers := make([]*fairlock.Locker, 4)
	for i := range lockers {
		l, err := fairlock.New(rdb.NewClient(), fairlock.WithKeyPrefix(prefix))
		if err != nil {
			return err
		}
		defer l.Close()
		lockers[i] = l
	}
	if err := inOrder(ctx, w, rdb, lockers[:3]); err != nil {
		return err
	}

	fair, err := contend(ctx, func(i int) mutex { return fairMutex{lockers[i], "hot"} })
	if err != nil {
		return err
	}
	spin, err := contend(ctx, func(int) mutex {
		return spinLock{rdb: rdb.Client, key: prefix + ":spin:hot", ttl: time.Second, retry: spinRetry}
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%d workers contend for one lock until it is granted %d times; each holds it %v\n"+
		"and wants it again at once; the spin lock retries every %v:\n", contenders, grants, hold, spinRetry)
	fmt.Fprintf(w, "  %-12s %-20s %s\n", "", "grants per worker", "longest wait")
	for _, r := range []struct {
		name string
		c    contention
	}{{"fairlock", fair}, {"SET NX spin", spin}} {
		counts := strings.Trim(fmt.Sprint(r.c.grants), "[]")
		fmt.Fprintf(w, "  %-12s %-20s %v\n", r.name, counts, r.c.maxWait.Round(time.Millisecond))
	}
	// FIFO hands the lock round-robin, so every worker gets about the same
	// share; allow for a worker that a busy machine slows between a release
	// and its next ask.
	if slices.Min(fair.grants) < grants/contenders/2 {
		return fmt.Errorf("fairlock starved a worker: %v", fair.grants)
	}
	return nil
}

// inOrder: jobs for two customers arrive one after another, each at some
// worker. A worker takes the customer's lock before processing, so each
// customer's jobs are processed one at a time and, because fairlock grants
// in FIFO order, in the order they arrived, whichever worker got them.
func inOrder(ctx context.Context, w io.Writer, rdb *exampleredis.Redis, workers []*fairlock.Locker) error {
	customers := []string{"acme", "globex"}
	const jobs = 12
	fmt.Fprintf(w, "%d jobs for %d customers arrive at %d workers:\n", jobs, len(customers), len(workers))
	for _, c := range customers {
		if err := rdb.Client.Del(ctx, prefix+":processed:"+c).Err(); err != nil {
			return err
		}
	}
	arrived := map[string][]int{}
	errs := make(chan error, jobs)
	for job := 1; job <= jobs; job++ {
		customer := customers[(job-1)%len(customers)]
		worker := (job - 1) % len(workers)
		arrived[customer] = append(arrived[customer], job)
		fmt.Fprintf(w, "  job %2d for %-6s arrives at worker %d\n", job, customer, worker+1)
		// The next job arrives only after this one has reached the lock
		// (queued, or granted at once), which makes arrival order certain.
		in := make(chan struct{})
		var once sync.Once
		reached := func(int) { once.Do(func() { close(in) }) }
		go func() {
			lease, err := workers[worker].Acquire(ctx, "customer:"+customer, fairlock.OnQueued(reached))
			reached(0)
			if err != nil {
				errs <- err
				return
			}
			errs <- errors.Join(process(ctx, rdb, customer, job), lease.Release(ctx))
		}()
		<-in
	}
	for range jobs {
		if err := <-errs; err != nil {
			return err
		}
	}
	for _, c := range customers {
		var processed []int
		if err := rdb.Client.LRange(ctx, prefix+":processed:"+c, 0, -1).ScanSlice(&processed); err != nil {
			return err
		}
		fmt.Fprintf(w, "  %-6s arrived %v\n         processed %v\n", c, arrived[c], processed)
		if !slices.Equal(arrived[c], processed) {
			return fmt.Errorf("%s: jobs processed out of arrival order", c)
		}
	}
	return nil
}

// process records the job in the customer's shared log, then takes a little
// time, so that later jobs of the same customer queue up behind it.
func process(ctx context.Context, rdb *exampleredis.Redis, customer string, job int) error {
	key := prefix + ":processed:" + customer
	if err := rdb.Client.RPush(ctx, key, job).Err(); err != nil {
		return err
	}
	time.Sleep(10 * time.Millisecond)
	return rdb.Client.Expire(ctx, key, time.Minute).Err()
}

const (
	contenders = 4
	grants     = 60
	hold       = 2 * time.Millisecond
	spinRetry  = 20 * time.Millisecond // a common retry delay for spin locks
)

// mutex is what contend needs of a lock: take it, get the way to give it
// back. lock calls inLine once the caller has its place in line.
type mutex interface {
	lock(ctx context.Context, inLine func()) (unlock func(context.Context) error, err error)
}

type fairMutex struct {
	l    *fairlock.Locker
	name string
}

// lock's caller is in line once it has queued, or got the lock at once.
func (m fairMutex) lock(ctx context.Context, inLine func()) (func(context.Context) error, error) {
	lease, err := m.l.Acquire(ctx, m.name, fairlock.OnQueued(func(int) { inLine() }))
	if err != nil {
		return nil, err
	}
	inLine()
	return lease.Release, nil
}

type contention struct {
	grants  []int         // grants per worker
	maxWait time.Duration // longest any worker waited, counting a wait cut off at the end
}

// contend runs workers that each take the lock, work for hold, release it
// and immediately want it again, until the lock was granted `grants` times.
// Grants count once every worker is in line: a worker that a busy machine
// started late was not starved by the lock.
func contend(ctx context.Context, newMutex func(worker int) mutex) (contention, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		total  atomic.Int64
		inLine atomic.Int64 // workers in line
		mu     sync.Mutex
		res    = contention{grants: make([]int, contenders)}
		wg     sync.WaitGroup
		errs   = make(chan error, contenders)
	)
	for i := range contenders {
		m := newMutex(i)
		joined := sync.OnceFunc(func() { inLine.Add(1) })
		wg.Go(func() {
			for {
				start := time.Now()
				unlock, err := m.lock(ctx, joined)
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
				var n int64 // 0 for a grant that does not count
				if inLine.Load() == contenders {
					n = total.Add(1)
				}
				if n <= grants {
					mu.Lock()
					if n > 0 {
						res.grants[i]++
					}
					mu.Unlock()
					time.Sleep(hold)
				}
				if err := unlock(context.WithoutCancel(ctx)); err != nil {
					errs <- err
					return
				}
				if n >= grants {
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
