package fairlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/fairlock/fairlock/fairlock"
	"github.com/redis/go-redis/v9"
)

// exampleRedis stands in for a real Redis in the examples.
func exampleRedis() (*redis.Client, func()) {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	return c, func() { c.Close(); mr.Close() }
}

func ExampleLocker_Acquire() {
	client, stop := exampleRedis()
	defer stop()
	locker, err := fairlock.New(client)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	ctx := context.Background()
	lease, err := locker.Acquire(ctx, "invoice:42")
	if err != nil {
		panic(err)
	}
	// Work while holding the lock; pass lease.Fence() to the storage you
	// write, so that it can reject a holder whose lease ran out.
	fmt.Println("holding", lease.Name(), "with a fence:", lease.Fence() > 0)
	if err := lease.Release(ctx); err != nil {
		panic(err)
	}
	fmt.Println(lease.Err())
	// Output:
	// holding invoice:42 with a fence: true
	// fairlock: lease released
}

func ExampleLocker_TryAcquire() {
	client, stop := exampleRedis()
	defer stop()
	locker, _ := fairlock.New(client)
	defer locker.Close()

	ctx := context.Background()
	first, _ := locker.TryAcquire(ctx, "report")
	if _, err := locker.TryAcquire(ctx, "report"); errors.Is(err, fairlock.ErrNotAcquired) {
		fmt.Println("busy, try later")
	}
	first.Release(ctx)
	second, err := locker.TryAcquire(ctx, "report")
	fmt.Println("after release:", err, second.Fence() > first.Fence())
	second.Release(ctx)
	// Output:
	// busy, try later
	// after release: <nil> true
}

func ExampleLocker_Do() {
	client, stop := exampleRedis()
	defer stop()
	locker, _ := fairlock.New(client)
	defer locker.Close()

	err := locker.Do(context.Background(), "account:7", func(ctx context.Context) error {
		// ctx is cancelled, with cause ErrLost, if the lease is lost: check
		// it before every step that must not run without the lock.
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		fmt.Println("debiting account 7")
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// debiting account 7
	// done: <nil>
}

func ExampleLocker_Inspect() {
	client, stop := exampleRedis()
	defer stop()
	locker, _ := fairlock.New(client)
	defer locker.Close()

	ctx := context.Background()
	lease, _ := locker.Acquire(ctx, "nightly-report", fairlock.WithMetadata("host-a"))
	queued, granted := make(chan int), make(chan *fairlock.Lease)
	go func() {
		next, _ := locker.Acquire(ctx, "nightly-report", fairlock.WithMetadata("host-b"), fairlock.OnQueued(func(pos int) { queued <- pos }))
		granted <- next
	}()
	<-queued
	st, err := locker.Inspect(ctx, fairlock.LockMutex, "nightly-report")
	fmt.Println("held by the lease:", st.Holders[0].Token == lease.Token(), st.Holders[0].Metadata, err)
	for _, w := range st.Waiters {
		fmt.Println("waiter at position", w.Position, w.Metadata)
	}
	lease.Release(ctx)
	next := <-granted
	fmt.Println("granted to the waiter:", next.Token() == st.Waiters[0].Token)
	next.Release(ctx)
	// Output:
	// held by the lease: true host-a <nil>
	// waiter at position 1 host-b
	// granted to the waiter: true
}

func ExampleLocker_ForceRelease() {
	client, stop := exampleRedis()
	defer stop()
	// Short TTLs, so that the stuck holder hears of it within 100 ms.
	locker, _ := fairlock.New(client, fairlock.WithLeaseTTL(300*time.Millisecond), fairlock.WithWaiterTTL(300*time.Millisecond))
	defer locker.Close()

	ctx := context.Background()
	stuck, _ := locker.Acquire(ctx, "nightly-report")
	// An operator ends exactly the lease they looked at; nobody waits, so
	// the lock is free afterwards.
	res, err := locker.ForceRelease(ctx, fairlock.LockMutex, "nightly-report", stuck.Token())
	fmt.Println(res.Ended[0] == stuck.Token(), len(res.Granted), err)
	// The holder learns at its next heartbeat. Until then it believes it
	// holds the lock: only storage that checks fences is safe from it.
	<-stuck.Done()
	fmt.Println(stuck.Err())
	// Output:
	// true 0 <nil>
	// fairlock: lease lost
}

// At most two exports per customer run at once, started in the order they
// were asked for.
func ExampleSemaphore() {
	client, stop := exampleRedis()
	defer stop()
	locker, _ := fairlock.New(client)
	defer locker.Close()

	ctx := context.Background()
	exports, err := locker.Semaphore("exports:customer-42", 2)
	if err != nil {
		panic(err)
	}
	first, _ := exports.Acquire(ctx, 1)
	second, _ := exports.Acquire(ctx, 1)
	if _, err := exports.TryAcquire(ctx, 1); errors.Is(err, fairlock.ErrNotAcquired) {
		fmt.Println("a third export waits its turn")
	}
	st, _ := exports.Inspect(ctx)
	fmt.Printf("%d of %d permits in use\n", st.InUse, st.Capacity)
	first.Release(ctx)
	second.Release(ctx)
	// Output:
	// a third export waits its turn
	// 2 of 2 permits in use
}

// Readers share the lock; a writer waits only for the readers ahead of it,
// and readers who come after it wait for it.
func ExampleRWMutex() {
	client, stop := exampleRedis()
	defer stop()
	locker, _ := fairlock.New(client)
	defer locker.Close()

	ctx := context.Background()
	config, err := locker.RWMutex("config:tenant-7")
	if err != nil {
		panic(err)
	}
	r1, _ := config.RLock(ctx)
	r2, _ := config.RLock(ctx)
	st, _ := config.Inspect(ctx)
	fmt.Println("readers:", len(st.Holders))
	if _, err := config.TryLock(ctx); errors.Is(err, fairlock.ErrNotAcquired) {
		fmt.Println("a writer must wait for them")
	}
	r1.Release(ctx)
	r2.Release(ctx)
	w, _ := config.Lock(ctx)
	st, _ = config.Inspect(ctx)
	fmt.Println("writer:", !st.Holders[0].Shared)
	w.Release(ctx)
	// Output:
	// readers: 2
	// a writer must wait for them
	// writer: true
}

// A noisy tenant's backlog does not hold up a quiet tenant: each tenant is a
// group, the next permit goes to the group that has used the least, and no
// group holds more than its limit, even while the others are idle.
func ExampleWithGroup() {
	client, stop := exampleRedis()
	defer stop()
	locker, _ := fairlock.New(client)
	defer locker.Close()

	ctx := context.Background()
	jobs, err := locker.Semaphore("jobs", 2, fairlock.WithGroupLimit(1))
	if err != nil {
		panic(err)
	}
	first, _ := jobs.Acquire(ctx, 1, fairlock.WithGroup("noisy"))
	started := make(chan string, 2)
	var wg sync.WaitGroup
	for job := 2; job <= 3; job++ {
		queued := make(chan struct{})
		wg.Go(func() {
			lease, err := jobs.Acquire(ctx, 1, fairlock.WithGroup("noisy"), fairlock.OnQueued(func(int) { close(queued) }))
			if err != nil {
				panic(err)
			}
			started <- fmt.Sprintf("noisy job %d", job)
			lease.Release(ctx)
		})
		<-queued // the second permit is free, but noisy is at its limit
	}
	quiet, _ := jobs.Acquire(ctx, 1, fairlock.WithGroup("quiet"))
	fmt.Println("the quiet job starts at once, ahead of 2 noisy jobs")
	first.Release(ctx)
	wg.Wait()
	close(started)
	for s := range started {
		fmt.Println(s)
	}
	quiet.Release(ctx)
	// Output:
	// the quiet job starts at once, ahead of 2 noisy jobs
	// noisy job 2
	// noisy job 3
}

// A group's weight gives it that many times the share of a group of weight
// 1 while both wait: here "paid" gets 3 times the permit-time of "free".
// Its weight is the one its latest request named, which Inspect shows.
func ExampleWithGroupWeight() {
	client, stop := exampleRedis()
	defer stop()
	locker, _ := fairlock.New(client)
	defer locker.Close()

	ctx := context.Background()
	jobs, err := locker.Semaphore("jobs", 1)
	if err != nil {
		panic(err)
	}
	held, _ := jobs.Acquire(ctx, 1, fairlock.WithGroup("paid"), fairlock.WithGroupWeight(3))
	queued, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		lease, err := jobs.Acquire(ctx, 1, fairlock.WithGroup("free"), fairlock.OnQueued(func(int) { close(queued) }))
		if err == nil {
			lease.Release(ctx)
		}
	}()
	<-queued
	st, _ := jobs.Inspect(ctx)
	fmt.Printf("holder: group %s, weight %d\n", st.Holders[0].Group, st.Holders[0].Weight)
	fmt.Printf("waiter: group %s, weight %d\n", st.Waiters[0].Group, st.Waiters[0].Weight)
	held.Release(ctx)
	<-done
	// Output:
	// holder: group paid, weight 3
	// waiter: group free, weight 1
}

// A request of priority 9 passes the waiters of lower priority: the
// interactive request queued last is granted first.
func ExampleWithPriority() {
	client, stop := exampleRedis()
	defer stop()
	locker, _ := fairlock.New(client)
	defer locker.Close()

	ctx := context.Background()
	held, _ := locker.Acquire(ctx, "render")
	granted := make(chan string, 2)
	queue := func(who string, priority int) {
		queued := make(chan struct{})
		go func() {
			lease, err := locker.Acquire(ctx, "render", fairlock.WithPriority(priority), fairlock.OnQueued(func(int) { close(queued) }))
			if err == nil {
				granted <- who
				lease.Release(ctx)
			}
		}()
		<-queued
	}
	queue("batch", 0)
	queue("interactive", 9)
	held.Release(ctx)
	fmt.Println(<-granted)
	fmt.Println(<-granted)
	// Output:
	// interactive
	// batch
}

// Waiting raises a waiter's priority one level per aging: a batch request
// that has waited 9 agings ranks as high as an interactive one, and goes
// first, as it came first.
func ExampleWithPriorityAging() {
	client, stop := exampleRedis()
	defer stop()
	locker, _ := fairlock.New(client, fairlock.WithPriorityAging(20*time.Millisecond))
	defer locker.Close()

	ctx := context.Background()
	held, _ := locker.Acquire(ctx, "render")
	granted := make(chan string, 2)
	queue := func(who string, priority int) {
		queued := make(chan struct{})
		go func() {
			lease, err := locker.Acquire(ctx, "render", fairlock.WithPriority(priority), fairlock.OnQueued(func(int) { close(queued) }))
			if err == nil {
				granted <- who
				lease.Release(ctx)
			}
		}()
		<-queued
	}
	queue("batch", 0)
	time.Sleep(300 * time.Millisecond) // more than 9 agings
	queue("interactive", 9)
	held.Release(ctx)
	fmt.Println(<-granted)
	fmt.Println(<-granted)
	// Output:
	// batch
	// interactive
}

func ExampleElection() {
	client, stop := exampleRedis()
	defer stop()
	alice, _ := fairlock.New(client)
	defer alice.Close()
	bob, _ := fairlock.New(client)
	defer bob.Close()

	ctx := context.Background()
	aliceRuns, _ := alice.Election("scheduler")
	bobRuns, _ := bob.Election("scheduler")
	// Anyone may follow the leaders: the current one, then each change.
	watch, cancel := context.WithCancel(ctx)
	defer cancel()
	leaders := bobRuns.Observe(watch)

	term, err := aliceRuns.Campaign(ctx, "alice:8080")
	if err != nil {
		panic(err)
	}
	fmt.Println("observed:", (<-leaders).Value)
	// Bob waits his turn: candidates lead in the order they campaigned.
	next := make(chan *fairlock.Term)
	go func() {
		t, _ := bobRuns.Campaign(ctx, "bob:8080")
		next <- t
	}()
	// The leader stamps its writes with its epoch; a store that refuses
	// an epoch older than the newest it saw fences a deposed leader.
	first := term.Epoch()
	term.Resign(ctx)
	bobTerm := <-next
	fmt.Println("observed:", (<-leaders).Value)
	fmt.Println("epochs grow:", bobTerm.Epoch() > first)
	leader, _ := aliceRuns.Leader(ctx)
	fmt.Println("leader:", leader.Value)
	bobTerm.Resign(ctx)
	// Output:
	// observed: alice:8080
	// observed: bob:8080
	// epochs grow: true
	// leader: bob:8080
}

func ExampleMultiMutex() {
	client, stop := exampleRedis()
	defer stop()
	locker, _ := fairlock.New(client)
	defer locker.Close()

	ctx := context.Background()
	// A transfer locks both accounts. Named in either order, the mutexes
	// are taken in one order for every caller, so two transfers between
	// the same accounts, in opposite directions, cannot deadlock.
	transfer, err := locker.MultiMutex("account:42", "account:7")
	if err != nil {
		panic(err)
	}
	fmt.Println(transfer.Names())
	err = transfer.Do(ctx, func(ctx context.Context) error {
		// Debit 42 and credit 7, passing each account's store the fence
		// of its own lease.
		return nil
	})
	fmt.Println("transferred:", err == nil)
	// Output:
	// [account:42 account:7]
	// transferred: true
}
