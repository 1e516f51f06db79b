// Command tenants shows fair share between tenants on one Semaphore: a
// noisy tenant keeps many jobs queued while a few quiet tenants send a job
// now and then. Without groups the semaphore is one FIFO line, so every
// quiet job waits behind the noisy tenant's backlog. With
// fairlock.WithGroup(tenant), the next free permit goes to the tenant that
// holds the fewest, so a quiet tenant's job starts as soon as one job ends,
// and the noisy tenant still gets every permit nobody else wants.
//
// Each tenant is a goroutine group with its own Redis client and Locker,
// which is what a process per tenant would have.
//
//	go run ./examples/tenants
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/fairlock/fairlock/examples/internal/exampleredis"
	"github.com/fairlock/fairlock/fairlock"
)

const (
	prefix   = "example-tenants"
	capacity = 2  // jobs that may run at once, all tenants together
	backlog  = 16 // jobs the noisy tenant keeps queued
	quiet    = 3  // quiet tenants, one job at a time each
)

// The test shortens runFor.
var (
	runFor = time.Second           // each of the two runs
	job    = 5 * time.Millisecond  // how long a job holds its permit
	pause  = 20 * time.Millisecond // a quiet tenant's pause between jobs
)

func main() { exampleredis.Main(run) }

// run is the example; exampleredis.Main opens rdb and passes it in.
func run(ctx context.Context, w io.Writer, rdb *exampleredis.Redis) error {
	fmt.Fprintln(w, "using", rdb)
	fmt.Fprintf(w, "a noisy tenant keeps %d jobs queued; %d quiet tenants send one job, then pause %v;\n"+
		"%d jobs run at once, each for %v; each run lasts %v, and then until every tenant had a job\n", backlog, quiet, pause, capacity, job, runFor)
	for _, grouped := range []bool{false, true} {
		stats, err := contend(ctx, rdb, grouped)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, map[bool]string{false: "\nwithout groups: one FIFO line",
			true: "\nwith fairlock.WithGroup(tenant): fair share between tenants"}[grouped])
		fmt.Fprintf(w, "  %-8s %6s %6s %10s %11s\n", "tenant", "jobs", "share", "mean wait", "worst wait")
		total := 0
		for _, s := range stats {
			total += s.grants
		}
		for _, s := range stats {
			if s.grants == 0 {
				return fmt.Errorf("%s was never served", s.tenant)
			}
			mean := s.waited / time.Duration(max(s.grants, 1))
			fmt.Fprintf(w, "  %-8s %6d %5.0f%% %10v %11v\n", s.tenant, s.grants, 100*float64(s.grants)/float64(total),
				mean.Round(100*time.Microsecond), s.worst.Round(100*time.Microsecond))
		}
	}
	return nil
}

type tenantStats struct {
	tenant string
	grants int
	waited time.Duration // in all, over the grants
	worst  time.Duration // counting a wait cut off at the end
}

// contend runs every tenant on a semaphore of its own for this run, with or
// without a group per tenant. The run lasts runFor and then until every
// tenant has had a job, so that a slow machine, where starting the
// goroutines can take much of runFor, still shows every tenant's wait; run's
// context bounds that.
func contend(ctx context.Context, rdb *exampleredis.Redis, grouped bool) ([]tenantStats, error) {
	name := map[bool]string{false: "jobs-fifo", true: "jobs-grouped"}[grouped]
	sems := make([]*fairlock.Semaphore, 1+quiet)
	for i := range sems {
		l, err := fairlock.New(rdb.NewClient(), fairlock.WithKeyPrefix(prefix))
		if err != nil {
			return nil, err
		}
		defer l.Close()
		if sems[i], err = l.Semaphore(name, capacity); err != nil {
			return nil, err
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		mu        sync.Mutex
		wg        sync.WaitGroup
		stats     = make([]tenantStats, len(sems))
		unserved  = len(sems)
		allServed = make(chan struct{})
		errs      = make(chan error, backlog+quiet)
	)
	for i, sem := range sems {
		tenant, workers, rest := "noisy", backlog, time.Duration(0)
		if i > 0 {
			tenant, workers, rest = fmt.Sprintf("quiet-%d", i), 1, pause
		}
		stats[i].tenant = tenant
		var opts []fairlock.AcquireOption
		if grouped {
			opts = append(opts, fairlock.WithGroup(tenant))
		}
		for range workers {
			wg.Go(func() {
				for {
					asked := time.Now()
					lease, err := sem.Acquire(runCtx, 1, opts...)
					waited := time.Since(asked)
					mu.Lock()
					if s := &stats[i]; err == nil {
						if s.grants == 0 {
							if unserved--; unserved == 0 {
								close(allServed)
							}
						}
						s.grants, s.waited, s.worst = s.grants+1, s.waited+waited, max(s.worst, waited)
					} else {
						s.worst = max(s.worst, waited)
					}
					mu.Unlock()
					if err != nil {
						if runCtx.Err() == nil {
							errs <- err
						}
						return
					}
					time.Sleep(job)
					if err := lease.Release(context.WithoutCancel(ctx)); err != nil {
						errs <- err
						return
					}
					select {
					case <-runCtx.Done():
						return
					case <-time.After(rest):
					}
				}
			})
		}
	}
	select {
	case <-time.After(runFor):
	case <-ctx.Done():
	}
	select {
	case <-allServed:
	case <-ctx.Done():
	}
	stop()
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return stats, errors.Join(all...)
}
