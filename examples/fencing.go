package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fairlock/fairlock/examples/internal/exampleredis"
	"github.com/fairlock/fairlock/fairlock"
)

// ErrStaleFence is returned by Store.Write when a newer holder already wrote.
var ErrStaleFence = errors.New("stale fence: a newer lock holder has written")

// Store is the protected resource: a document kept in a Redis hash together
// with the fence of its last writer. Any storage works the same way, for
// example an SQL UPDATE ... WHERE fence < $1.
type Store struct {
	rdb redis.Scripter
	key string
}

// fencedWrite accepts a write only if its fence is greater than the last
// accepted one. The compare and the write are one script, so nothing can
// slip in between. Fences are microsecond-sized integers, well within the
// 2^53 that a Lua number holds exactly.
var fencedWrite = redis.NewScript(`
local last = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
if tonumber(ARGV[1]) <= last then return 0 end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'value', ARGV[2])
redis.call('PEXPIRE', KEYS[1], 60000)
return 1`)

// Write stores value if fence is newer than the fence of the last write.
func (s Store) Write(ctx context.Context, fence int64, value string) error {
	ok, err := fencedWrite.Run(ctx, s.rdb, []string{s.key}, fence, value).Int()
	if err != nil {
		return err
	}
	if ok == 0 {
		return ErrStaleFence
	}
	return nil
}

// fencing shows why a lease alone cannot protect data from a holder
// that pauses (a GC pause, swap, SIGSTOP) for longer than its lease, and how
// the fencing token fixes it.
//
// Alice takes the lock and then stalls. Her lease runs out, so the lock
// passes to Bob, who writes. When Alice wakes up she still believes she
// holds the lock and writes too. The storage compares the fence each writer
// presents with the last one it accepted, and refuses Alice's older fence.
//
//	go run ./examples fencing
func fencing(ctx context.Context, w io.Writer, rdb *exampleredis.Redis) error {
	fmt.Fprintln(w, "using", rdb)

	store := Store{rdb: rdb.Client, key: "example-fencing:document"}
	if err := rdb.Client.Del(ctx, store.key).Err(); err != nil {
		return err
	}
	const name = "document"
	// Short leases keep the example fast. Alice's process will not renew:
	// a paused process cannot, which is the whole point.
	opts := []fairlock.Option{
		fairlock.WithKeyPrefix("example-fencing"),
		fairlock.WithLeaseTTL(300 * time.Millisecond),
		fairlock.WithWaiterTTL(600 * time.Millisecond),
	}
	alice, err := fairlock.New(rdb.NewClient(), append(opts, fairlock.WithAutoRenew(false))...)
	if err != nil {
		return err
	}
	defer alice.Close()
	bob, err := fairlock.New(rdb.NewClient(), opts...)
	if err != nil {
		return err
	}
	defer bob.Close()

	aliceLease, err := alice.Acquire(ctx, name)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "alice: acquired the lock")
	if err := store.Write(ctx, aliceLease.Fence(), "draft by alice"); err != nil {
		return err
	}
	fmt.Fprintln(w, "alice: wrote \"draft by alice\"")

	// Alice stalls here. Nobody renews her lease, it expires, and the lock
	// is granted to the next in line.
	fmt.Fprintln(w, "alice: paused (GC, swap, SIGSTOP...)")
	bobLease, err := bob.Acquire(ctx, name)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "bob:   acquired the lock after alice's lease expired")
	if err := store.Write(ctx, bobLease.Fence(), "final by bob"); err != nil {
		return err
	}
	fmt.Fprintln(w, "bob:   wrote \"final by bob\"")
	if err := bobLease.Release(ctx); err != nil {
		return err
	}

	// Alice resumes, unaware she lost the lock, and writes with her fence.
	// Checking aliceLease.Err() first would not save her: a pause can just
	// as well fall between that check and the write. Only the storage,
	// comparing fences at the moment of the write, can refuse it.
	fmt.Fprintln(w, "alice: resumed, still thinks she holds the lock")
	err = store.Write(ctx, aliceLease.Fence(), "stale edit by alice")
	switch {
	case errors.Is(err, ErrStaleFence):
		fmt.Fprintln(w, "alice: write rejected:", err)
	case err != nil:
		return err
	default:
		return errors.New("alice's stale write was accepted: fencing failed")
	}
	// Her lease is gone: Release says so and changes nothing of Bob's.
	if err := aliceLease.Release(ctx); !errors.Is(err, fairlock.ErrNotHeld) {
		return fmt.Errorf("alice's Release of a lost lease: got %v, want ErrNotHeld", err)
	}
	fmt.Fprintln(w, "alice: Release reports the lease was lost (ErrNotHeld)")

	value, err := rdb.Client.HGet(ctx, store.key, "value").Result()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "document: %q\n", value)
	return nil
}
