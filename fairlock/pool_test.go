package fairlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// A burst of Acquire calls on one Locker, more than its client's pool
// sends within a waiter TTL, must not starve the heartbeat of connections:
// its waiters' key would expire, every waiter would lose its place and
// queue again, in a burst as large, and so on for as long as the lock is
// held. The Locker's calls share their round trips (batch.go), so they
// take one connection of the pool at a time. A proxy's latency, not load,
// would make the burst long: each request takes 100 ms, so 120 waiters
// sent one by one would take a pool of 4 three seconds, past the waiter
// TTL of 2 s; a renewal with a connection of its own takes 100 ms of the
// 1.3 s between a heartbeat (every 667 ms) and its waiters' deadline.
func TestBurstOfWaitersKeepsTheirPlaces(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 2*time.Minute)
	const name = "burst"
	holder := newLocker(t, srv.Client(t))
	held := mustAcquire(t, holder, name)
	defer released(t, held)

	const ttl = 2 * time.Second
	px := redistest.StartProxy(t, srv.Addr)
	px.SetLatency(50*time.Millisecond, 50*time.Millisecond)
	var lost atomic.Int64
	client := redis.NewClient(&redis.Options{Addr: px.Addr, PoolSize: 4})
	defer client.Close()
	l, err := fairlock.New(client, fairlock.WithWaiterTTL(ttl), fairlock.WithObserver(func(e fairlock.Event) {
		if e.Kind == fairlock.EventCancelled && errors.Is(e.Err, fairlock.ErrPlaceLost) {
			lost.Add(1)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	waiters, cancel := context.WithCancel(ctx)
	defer cancel()
	const n = 120
	for range n {
		go l.Acquire(waiters, name) //nolint:errcheck // they wait until the end
	}
	rdb := srv.Client(t)
	start := time.Now()
	for rdb.ZCard(ctx, "fairlock:{"+name+"}:order").Val() < n {
		if ctx.Err() != nil {
			t.Fatalf("%d waiters did not all queue", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("%d waiters queued in %v through a pool of 4, 100 ms a request", n, time.Since(start).Round(time.Millisecond))
	// Two waiter TTLs more: a waiters' key left unrenewed would be gone.
	time.Sleep(2 * ttl)
	if got := lost.Load(); got > 0 {
		t.Fatalf("%d places lost while %d waiters queued and waited on a pool of 4 (waiter TTL %v)", got, n, ttl)
	}
	if queued := rdb.ZCard(ctx, "fairlock:{"+name+"}:order").Val(); queued != n {
		t.Fatalf("%d of %d waiters queued after two waiter TTLs", queued, n)
	}
}
