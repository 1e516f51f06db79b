package fairlocktest_test

import (
	"context"
	"fmt"
	"sync"

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
