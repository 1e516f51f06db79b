package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/fairlock/fairlock/examples/internal/contention"
	"github.com/fairlock/fairlock/examples/internal/exampleredis"
	"github.com/fairlock/fairlock/fairlock"
)

const (
	totalCents = 100_00 // ¥100.00
	shares     = 10
	users      = 20
	instances  = 3 // app servers, each with its own Locker
	lockName   = "redpacket:1"
	packetKey  = "example-redpacket:packet:1"
)

// writePacket stores the new balance and shares left, but only for a fence
// newer than the last writer's. A holder that paused past its lease carries
// an old fence and is refused, so it cannot overwrite a newer balance.
//
// KEYS[1] packet hash; ARGV fence, balance, left. Reply 1 written, 0 stale.
var writePacket = redis.NewScript(`
local last = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
if tonumber(ARGV[1]) <= last then return 0 end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'balance', ARGV[2], 'left', ARGV[3])
redis.call('PEXPIRE', KEYS[1], 60000)
return 1`)

var errStale = errors.New("stale fence: the lease was lost before the write")

func write(ctx context.Context, rdb redis.Scripter, fence, balance, left int64) error {
	ok, err := writePacket.Run(ctx, rdb, []string{packetKey}, fence, balance, left).Int()
	if err == nil && ok == 0 {
		err = errStale
	}
	return err
}

// grab is one user's turn: read the packet, draw an amount, write it back.
// It runs only while the user holds the lock.
func grab(ctx context.Context, rdb *redis.Client, lease *fairlock.Lease, draw func(balance, left int64) int64) (int64, error) {
	var p struct {
		Balance int64 `redis:"balance"`
		Left    int64 `redis:"left"`
	}
	if err := rdb.HMGet(ctx, packetKey, "balance", "left").Scan(&p); err != nil {
		return 0, err
	}
	if p.Left == 0 {
		return 0, nil // packet empty
	}
	amount := draw(p.Balance, p.Left)
	return amount, write(ctx, rdb, lease.Fence(), p.Balance-amount, p.Left-1)
}

// redpacket is the seed article's drawRedPacket scenario done with a
// fair lock: a red packet holding a fixed amount is grabbed by many users at
// once, through several app instances.
//
// Three things must hold, and the program checks each of them:
//
//   - the packet never pays out more than it holds (the lock makes each
//     read-compute-write of the balance exclusive);
//
//   - users are served in the order they arrived (fairlock grants FIFO, so
//     the first ten to arrive get the ten shares, not the luckiest spinners);
//
//   - a holder whose lease ran out cannot write (the fence is stored next to
//     the balance and every write compares it, in one Lua script).
//
//     go run ./examples redpacket
func redpacket(ctx context.Context, w io.Writer, rdb *exampleredis.Redis) error {
	fmt.Fprintln(w, "using", rdb)
	fmt.Fprintf(w, "packet: %s in %d shares, %d users, %d app instances\n", yuan(totalCents), shares, users, instances)

	clients := make([]*redis.Client, instances)
	lockers := make([]*fairlock.Locker, instances)
	for i := range lockers {
		clients[i] = rdb.NewClient()
		l, err := fairlock.New(clients[i], fairlock.WithKeyPrefix("example-redpacket"))
		if err != nil {
			return err
		}
		defer l.Close()
		lockers[i] = l
	}

	// The sender fills the packet under the lock. Users who arrive meanwhile
	// queue up; holding the lock until all have arrived makes the example's
	// arrival order certain, so the output can be checked.
	sender, err := lockers[0].Acquire(ctx, lockName)
	if err != nil {
		return err
	}
	if err := rdb.Client.Del(ctx, packetKey).Err(); err != nil {
		return err
	}
	if err := write(ctx, rdb.Client, sender.Fence(), totalCents, shares); err != nil {
		return err
	}

	// WeChat-style "double average" split: each share is random in
	// [1, 2*balance/left), the last takes the rest. A fixed seed keeps the
	// output stable; draws happen in grant order, one holder at a time.
	var (
		mu      sync.Mutex
		rng     = rand.New(rand.NewPCG(1, 2))
		served  []int
		amounts = make([]int64, users)
	)
	draw := func(balance, left int64) int64 {
		mu.Lock()
		defer mu.Unlock()
		if left == 1 {
			return balance
		}
		return 1 + rng.Int64N(2*balance/left-1)
	}

	// user u arrives at its app instance, waits its turn, and grabs.
	user := func(u int, queued func(position int)) error {
		inst := u % instances
		lease, err := lockers[inst].Acquire(ctx, lockName, fairlock.OnQueued(queued))
		if err != nil {
			return fmt.Errorf("user %d: %w", u+1, err)
		}
		mu.Lock()
		served = append(served, u)
		mu.Unlock()
		amount, err := grab(ctx, clients[inst], lease, draw)
		if err != nil {
			lease.Release(ctx) //nolint:errcheck // the grab error is the one to report
			return fmt.Errorf("user %d: %w", u+1, err)
		}
		mu.Lock()
		amounts[u] = amount
		mu.Unlock()
		return lease.Release(ctx)
	}

	// Users arrive one at a time: the next comes once this one is queued.
	var arrivals contention.Arrivals
	positions := make([]int, users)
	for u := range users {
		positions[u] = arrivals.Arrive(func(queued func(int)) error { return user(u, queued) })
	}
	if err := errors.Join(sender.Release(ctx), arrivals.Wait()); err != nil {
		return err
	}

	var paid int64
	for u, a := range amounts {
		paid += a
		got := "packet empty"
		if a > 0 {
			got = "got " + yuan(a)
		}
		fmt.Fprintf(w, "user %02d (instance %d, queue position %2d): %s\n", u+1, u%instances+1, positions[u], got)
	}
	balance, err := rdb.Client.HGet(ctx, packetKey, "balance").Int64()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "paid out %s, balance left %s\n", yuan(paid), yuan(balance))

	arrival := make([]int, users)
	for u := range arrival {
		arrival[u] = u
	}
	switch {
	case paid != totalCents || balance != 0:
		return fmt.Errorf("overdraw or loss: paid %d of %d, balance %d", paid, totalCents, balance)
	case !slices.Equal(served, arrival):
		return fmt.Errorf("not served in arrival order: %v", served)
	case slices.ContainsFunc(amounts[:shares], func(a int64) bool { return a <= 0 }):
		return fmt.Errorf("an early user got nothing: %v", amounts)
	}
	fmt.Fprintln(w, "served in arrival order: the first", shares, "users got the", shares, "shares")
	return nil
}

func yuan(cents int64) string { return fmt.Sprintf("¥%d.%02d", cents/100, cents%100) }
