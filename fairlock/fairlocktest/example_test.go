package fairlocktest_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/fairlock/fairlocktest"
)

// Three workers, each with its own Locker as separate processes would have,
// queue for a lock one after another; the Recorder checks they were served
// in that order. In a test, fairlocktest.NewServer(t) replaces StartServer
// and Close, and rec.AssertFIFO(t, name) replaces CheckFIFO.
func Example() {
	ctx := context.Background()
	srv, err := fairlocktest.StartServer()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	rec := fairlocktest.NewRecorder()

	// Hold the lock while the workers arrive, so that each of them queues.
	holder, _ := srv.NewLocker(rec.Option())
	first, err := holder.Acquire(ctx, "jobs")
	if err != nil {
		panic(err)
	}

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		served []string
	)
	for i, worker := range []string{"ann", "bob", "cid"} {
		locker, _ := srv.NewLocker(rec.Option())
		wg.Go(func() {
			lease, err := locker.Acquire(ctx, "jobs")
			if err != nil {
				panic(err)
			}
			mu.Lock()
			served = append(served, worker)
			mu.Unlock()
			lease.Release(ctx)
		})
		// The next worker starts once this one is in the queue, which
		// makes the arrival order certain.
		if err := rec.Wait(ctx, "jobs", fairlock.EventEnqueued, i+1); err != nil {
			panic(err)
		}
	}
	first.Release(ctx)
	wg.Wait()

	fmt.Println("served:", served)
	fmt.Println("FIFO:", rec.CheckFIFO("jobs"))
	fmt.Println("fences increase:", rec.CheckFences("jobs"))
	// Output:
	// served: [ann bob cid]
	// FIFO: <nil>
	// fences increase: <nil>
}

// A semaphore of two permits, full, and three workers queued behind it for
// one, two and one permits. Nobody passes anybody: when the holder lets
// go, ann takes one permit, and cid waits behind bob although one is free.
// The workers release through the Recorder, so that CheckCapacity counts
// each lease only until its Release was called (see Recorder.Release).
func ExampleRecorder_CheckCapacity() {
	ctx := context.Background()
	srv, err := fairlocktest.StartServer()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	rec := fairlocktest.NewRecorder()

	holder, _ := srv.NewLocker(rec.Option())
	sem, _ := holder.Semaphore("exports", 2)
	full, err := sem.Acquire(ctx, 2)
	if err != nil {
		panic(err)
	}

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		served []string
	)
	for i, w := range []struct {
		name    string
		permits int
	}{{"ann", 1}, {"bob", 2}, {"cid", 1}} {
		locker, _ := srv.NewLocker(rec.Option())
		sem, _ := locker.Semaphore("exports", 2)
		wg.Go(func() {
			lease, err := sem.Acquire(ctx, w.permits)
			if err != nil {
				panic(err)
			}
			mu.Lock()
			served = append(served, w.name)
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
			rec.Release(ctx, lease)
		})
		if err := rec.Wait(ctx, "exports", fairlock.EventEnqueued, i+1); err != nil {
			panic(err)
		}
	}
	rec.Release(ctx, full)
	wg.Wait()

	fmt.Println("served:", served)
	fmt.Println("FIFO:", rec.CheckFIFO("exports"))
	fmt.Println("at most 2 permits held:", rec.CheckCapacity("exports", 2))
	fmt.Println("at most 1 permit held:", rec.CheckCapacity("exports", 1) != nil)
	// Output:
	// served: [ann bob cid]
	// FIFO: <nil>
	// at most 2 permits held: <nil>
	// at most 1 permit held: true
}
