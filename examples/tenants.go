package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/fairlock/fairlock/examples/internal/contention"
	"github.com/fairlock/fairlock/examples/internal/exampleredis"
	"github.com/fairlock/fairlock/fairlock"
)

const (
	tenantsPrefix   = "example-tenants"
	tenantsCapacity = 2  // jobs that may run at once, all tenants together
	tenantsBacklog  = 16 // jobs the noisy tenant keeps queued
	quiet           = 3  // quiet tenants, one job at a time each
)

// The test shortens runFor.
var (
	runFor     = time.Second           // each of the two runs
	tenantsJob = 5 * time.Millisecond  // how long a job holds its permit
	pause      = 20 * time.Millisecond // a quiet tenant's pause between jobs
)

// tenants shows fair share between tenants on one Semaphore: a
// noisy tenant keeps many jobs queued while a few quiet tenants send a job
// now and then. Without groups the semaphore is one FIFO line, so every
// quiet job waits behind the noisy tenant's backlog. With
// fairlock.WithGroup(tenant), the next free permit goes to the tenant that
// has used the least permit-time, so a quiet tenant's job starts as soon as one job ends,
// and the noisy tenant still gets every permit nobody else wants.
//
// Each tenant is a goroutine group with its own Redis client and Locker,
// which is what a process per tenant would have.
//
//	go run ./examples tenants
func tenants(ctx context.Context, w io.Writer, rdb *exampleredis.Redis) error {
	fmt.Fprintln(w, "using", rdb)
	fmt.Fprintf(w, "a noisy tenant keeps %d jobs queued; %d quiet tenants send one job, then pause %v;\n"+
		"%d jobs run at once, each for %v; each run lasts %v, and then until every tenant had a job\n", tenantsBacklog, quiet, pause, tenantsCapacity, tenantsJob, runFor)
	for _, grouped := range []bool{false, true} {
		res, err := contend(ctx, rdb, grouped)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, map[bool]string{false: "\nwithout groups: one FIFO line",
			true: "\nwith fairlock.WithGroup(tenant): fair share between tenants"}[grouped])
		table := contention.Table{-8, 6, 6, 10, 11}
		table.Row(w, "tenant", "jobs", "share", "mean wait", "worst wait")
		for i, s := range res.Slots {
			if s.Grants == 0 {
				return fmt.Errorf("%s was never served", tenant(i))
			}
			share := fmt.Sprintf("%.0f%%", 100*float64(s.Grants)/float64(res.Total()))
			table.Row(w, tenant(i), s.Grants, share, s.Mean().Round(100*time.Microsecond), s.Worst.Round(100*time.Microsecond))
		}
	}
	return nil
}

// tenant names tenant i: the noisy one, then the quiet ones.
func tenant(i int) string {
	if i == 0 {
		return "noisy"
	}
	return fmt.Sprintf("quiet-%d", i)
}

// contend runs every tenant on a semaphore of its own for this run, with or
// without a group per tenant. The run lasts runFor and then until every
// tenant has had a job, so that a slow machine, where starting the
// goroutines can take much of runFor, still shows every tenant's wait; run's
// context bounds that.
func contend(ctx context.Context, rdb *exampleredis.Redis, grouped bool) (contention.Result, error) {
	name := map[bool]string{false: "jobs-fifo", true: "jobs-grouped"}[grouped]
	lockers, err := contention.NewLockers(rdb, 1+quiet, fairlock.WithKeyPrefix(tenantsPrefix))
	if err != nil {
		return contention.Result{}, err
	}
	defer lockers.Close()
	sems := make([]*fairlock.Semaphore, len(lockers))
	for i, l := range lockers {
		if sems[i], err = l.Semaphore(name, tenantsCapacity); err != nil {
			return contention.Result{}, err
		}
	}
	jobs := contention.Start(ctx, len(sems))
	for i, sem := range sems {
		var opts []fairlock.AcquireOption
		if grouped {
			opts = append(opts, fairlock.WithGroup(tenant(i)))
		}
		acquire := func(ctx context.Context, _ func()) (func(context.Context) error, error) {
			lease, err := sem.Acquire(ctx, 1, opts...)
			if err != nil {
				return nil, err
			}
			return lease.Release, nil
		}
		workers, rest := tenantsBacklog, time.Duration(0)
		if i > 0 {
			workers, rest = 1, pause
		}
		for range workers {
			jobs.Go(contention.Worker{Slot: i, Acquire: acquire, Hold: tenantsJob, Pause: rest})
		}
	}
	select {
	case <-time.After(runFor):
	case <-ctx.Done():
	}
	return jobs.Finish()
}
