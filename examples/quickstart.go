package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/fairlock/fairlock/examples/internal/exampleredis"
	"github.com/fairlock/fairlock/fairlock"
)

// quickstart shows the three ways to hold a fairlock: Acquire and
// Release around the work; Do, which releases for you and cancels the
// work's context if the lease is lost; and TryAcquire, which never waits.
//
// It runs on an embedded miniredis; set REDIS_URL to use a real server:
//
//	go run ./examples quickstart
//	REDIS_URL=redis://localhost:6379/0 go run ./examples quickstart
func quickstart(ctx context.Context, w io.Writer, rdb *exampleredis.Redis) error {
	fmt.Fprintln(w, "using", rdb)

	// One Locker per process: it owns the pub/sub connection and the
	// heartbeat timer that every lock and waiter of this process shares.
	locker, err := fairlock.New(rdb.Client, fairlock.WithKeyPrefix("example-quickstart"))
	if err != nil {
		return err
	}
	defer locker.Close()

	// 1. Acquire waits its turn in FIFO order; the lease is renewed in the
	// background until Release.
	lease, err := locker.Acquire(ctx, "invoice-42")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "acquired %q, fence %d\n", lease.Name(), lease.Fence())
	// Pass lease.Fence() to whatever you write, so the storage can refuse a
	// holder whose lease has run out (see fencing.go).
	fmt.Fprintln(w, "working...")
	if err := lease.Release(ctx); err != nil {
		return err
	}
	fmt.Fprintln(w, "released")

	// 2. Do holds the lock while fn runs. fn's ctx is cancelled if the lease
	// is lost, so work that honours ctx stops instead of running unprotected.
	err = locker.Do(ctx, "invoice-42", func(ctx context.Context) error {
		fmt.Fprintln(w, "in Do: lock held")
		select {
		case <-time.After(20 * time.Millisecond): // the work
			return nil
		case <-ctx.Done(): // lease lost (or caller gave up): stop now
			return ctx.Err()
		}
	})
	if err != nil {
		// errors.Is(err, fairlock.ErrLost) tells a lost lease from fn's own error.
		return err
	}
	fmt.Fprintln(w, "Do returned, lock released")

	// 3. TryAcquire never waits and never jumps the queue: it returns
	// fairlock.ErrNotAcquired if the lock is held or anyone is waiting.
	lease, err = locker.TryAcquire(ctx, "invoice-42")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "TryAcquire got it, fence %d\n", lease.Fence())
	return lease.Release(ctx)
}
