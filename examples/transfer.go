package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairlock/fairlock/examples/internal/exampleredis"
	"github.com/fairlock/fairlock/fairlock"
)

const (
	accounts  = 5
	workers   = 4
	transfers = 50 // per worker
	opening   = 100
)

// addFenced adds ARGV[2] to the balance in KEYS[1] if ARGV[1], the
// writer's fence for this account, is not older than the last one
// accepted; it returns 0, changing nothing, if it is.
var addFenced = redis.NewScript(`
local last = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
if tonumber(ARGV[1]) < last then return 0 end
redis.call('HSET', KEYS[1], 'fence', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'balance', ARGV[2])
redis.call('PEXPIRE', KEYS[1], 60000)
return 1`)

func account(i int) string { return fmt.Sprintf("account:%d", i) }

// transfer moves money between accounts, each transfer locking
// both accounts with a MultiMutex, from four processes at once and in
// random directions. Locked one by one, in the order each transfer names
// its accounts, a transfer from a to b and one from b to a can each hold
// one account and wait forever for the other; a MultiMutex takes the
// locks in one order for every caller, so no transfer waits on a cycle.
// Each account's store refuses a write whose fence is older than the last
// it accepted, so a holder that stalled past its lease cannot overwrite a
// newer balance.
//
//	go run ./examples transfer
func transfer(ctx context.Context, w io.Writer, rdb *exampleredis.Redis) error {
	fmt.Fprintln(w, "using", rdb)
	for i := range accounts {
		if err := rdb.Client.HSet(ctx, store(i), "balance", opening, "fence", 0).Err(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "total before:", total(ctx, rdb.Client))
	start := time.Now()
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		// One Locker per worker, as one per process.
		locker, err := fairlock.New(rdb.NewClient(), fairlock.WithKeyPrefix("example-transfer"))
		if err != nil {
			return err
		}
		defer locker.Close()
		wg.Go(func() {
			for range transfers {
				if err := transferOne(ctx, locker, rdb.Client); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fmt.Fprintf(w, "%d transfers by %d workers, in random directions, in %v\n", workers*transfers, workers, time.Since(start).Round(time.Millisecond))
	fmt.Fprintln(w, "total after:", total(ctx, rdb.Client))
	return nil
}

func store(i int) string { return "example-transfer:" + account(i) }

// transferOne moves 1 between two accounts drawn at random, holding both.
func transferOne(ctx context.Context, locker *fairlock.Locker, rdb *redis.Client) error {
	from, to := rand.IntN(accounts), rand.IntN(accounts-1)
	if to >= from {
		to++
	}
	both, err := locker.MultiMutex(account(from), account(to))
	if err != nil {
		return err
	}
	lease, err := both.Acquire(ctx)
	if err != nil {
		return err
	}
	for _, step := range []struct{ account, amount int }{{from, -1}, {to, 1}} {
		ok, err := addFenced.Run(ctx, rdb, []string{store(step.account)}, lease.Fence(account(step.account)), step.amount).Int()
		if err == nil && ok == 0 {
			err = fmt.Errorf("%s refused a stale fence", account(step.account))
		}
		if err != nil {
			lease.Release(ctx)
			return err
		}
	}
	return lease.Release(ctx)
}

// total is the sum of the balances.
func total(ctx context.Context, rdb *redis.Client) int64 {
	var sum int64
	for i := range accounts {
		n, _ := rdb.HGet(ctx, store(i), "balance").Int64()
		sum += n
	}
	return sum
}
