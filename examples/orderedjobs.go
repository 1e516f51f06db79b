package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/fairlock/fairlock/examples/internal/contention"
	"github.com/fairlock/fairlock/examples/internal/exampleredis"
	"github.com/fairlock/fairlock/fairlock"
)

const orderedPrefix = "example-orderedjobs"

// orderedjobs shows a fair lock serving per-customer jobs in the
// order they arrived, and, for contrast, a spin lock starving its workers.
//
// The workers are goroutines, each with its own Redis client and its own
// fairlock.Locker, which is exactly what separate processes would have; it
// keeps the example one `go run` and its test fast. Run them as processes
// against a real server and nothing changes.
//
//	go run ./examples orderedjobs
func orderedjobs(ctx context.Context, w io.Writer, rdb *exampleredis.Redis) error {
	fmt.Fprintln(w, "using", rdb)

	lockers, err := contention.NewLockers(rdb, contenders, fairlock.WithKeyPrefix(orderedPrefix))
	if err != nil {
		return err
	}
	defer lockers.Close()
	if err := inOrder(ctx, w, rdb, lockers[:3]); err != nil {
		return err
	}

	load := contention.Load{Workers: contenders, Grants: grants, Hold: hold}
	fair, err := load.Run(ctx, func(i int) contention.Acquire { return fairMutex{lockers[i], "hot"}.lock })
	if err != nil {
		return err
	}
	spin, err := load.Run(ctx, func(int) contention.Acquire {
		return spinLock{rdb: rdb.Client, key: orderedPrefix + ":spin:hot", ttl: time.Second, retry: spinRetry}.lock
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%d workers contend for one lock until it is granted %d times; each holds it %v\n"+
		"and wants it again at once; the spin lock retries every %v:\n", contenders, grants, hold, spinRetry)
	table := contention.Table{-12, -20}
	table.Row(w, "", "grants per worker", "longest wait")
	table.Row(w, "fairlock", fair.Counts(), fair.Worst().Round(time.Millisecond))
	table.Row(w, "SET NX spin", spin.Counts(), spin.Worst().Round(time.Millisecond))
	// FIFO hands the lock round-robin, so every worker gets about the same
	// share; allow for a worker that a busy machine slows between a release
	// and its next ask.
	if slices.Min(fair.Grants()) < grants/contenders/2 {
		return fmt.Errorf("fairlock starved a worker: %v", fair.Grants())
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
		if err := rdb.Client.Del(ctx, orderedPrefix+":processed:"+c).Err(); err != nil {
			return err
		}
	}
	arrived := map[string][]int{}
	// The next job arrives only after this one has reached the lock (queued,
	// or granted at once), which makes arrival order certain.
	var arrivals contention.Arrivals
	for job := 1; job <= jobs; job++ {
		customer := customers[(job-1)%len(customers)]
		worker := (job - 1) % len(workers)
		arrived[customer] = append(arrived[customer], job)
		fmt.Fprintf(w, "  job %2d for %-6s arrives at worker %d\n", job, customer, worker+1)
		arrivals.Arrive(func(reached func(int)) error {
			lease, err := workers[worker].Acquire(ctx, "customer:"+customer, fairlock.OnQueued(reached))
			reached(0)
			if err != nil {
				return err
			}
			return errors.Join(process(ctx, rdb, customer, job), lease.Release(ctx))
		})
	}
	if err := arrivals.Wait(); err != nil {
		return err
	}
	for _, c := range customers {
		var processed []int
		if err := rdb.Client.LRange(ctx, orderedPrefix+":processed:"+c, 0, -1).ScanSlice(&processed); err != nil {
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
	key := orderedPrefix + ":processed:" + customer
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
)

type fairMutex struct {
	l    *fairlock.Locker
	name string
}

// lock is a contention.Acquire: the caller is in line once it has queued;
// one granted at once is in line by then too.
func (m fairMutex) lock(ctx context.Context, inLine func()) (func(context.Context) error, error) {
	lease, err := m.l.Acquire(ctx, m.name, fairlock.OnQueued(func(int) { inLine() }))
	if err != nil {
		return nil, err
	}
	return lease.Release, nil
}
