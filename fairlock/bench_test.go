package fairlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The script paths on a real redis-server, one client. Run with
//
//	go test -run '^$' -bench . ./fairlock/
func benchLocker(b *testing.B, srv *redistest.Server, opts ...Option) *Locker {
	l, err := New(srv.Client(b), opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// naiveRelease is the spin locks' release: compare and delete.
var naiveRelease = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// BenchmarkAcquireRelease is an uncontended acquire and release: two round
// trips. The observer and metadata variants show what WithObserver and
// WithMetadata cost; naive is the
// baseline of a spin lock's uncontended cycle (SET NX PX, then a Lua
// compare-and-delete) on the same server, for the ratio and the
// allocations.
func BenchmarkAcquireRelease(b *testing.B) {
	srv := redistest.Start(b)
	b.Run("naive", func(b *testing.B) {
		client := srv.Client(b)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if err := client.SetNX(ctx, "naive", "token", 10*time.Second).Err(); err != nil {
				b.Fatal(err)
			}
			if err := naiveRelease.Run(ctx, client, []string{"naive"}, "token").Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, bc := range []struct {
		name    string
		opts    []Option
		acquire []AcquireOption
	}{
		{"observer=off", nil, nil},
		{"observer=on", []Option{WithObserver(func(Event) {})}, nil},
		{"metadata=on", nil, []AcquireOption{WithMetadata("host-a pid 4242 job 7")}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := benchLocker(b, srv, bc.opts...)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				s, err := l.Acquire(ctx, "bench", bc.acquire...)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHandoff passes the lock back and forth between two Lockers: each
// operation is a release that grants the waiting one, and its wake-up.
func BenchmarkHandoff(b *testing.B) {
	srv := redistest.Start(b)
	ctx := context.Background()
	lockers := []*Locker{benchLocker(b, srv), benchLocker(b, srv)}
	held, err := lockers[0].Acquire(ctx, "handoff")
	if err != nil {
		b.Fatal(err)
	}
	var next sync.WaitGroup
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		other := lockers[(i+1)%2]
		got := make(chan *Lease, 1)
		queued := make(chan struct{})
		next.Add(1)
		go func() {
			defer next.Done()
			s, err := other.Acquire(ctx, "handoff", OnQueued(func(int) { close(queued) }))
			if err != nil {
				b.Error(err)
			}
			got <- s
		}()
		<-queued
		if err := held.Release(ctx); err != nil {
			b.Fatal(err)
		}
		held = <-got
		next.Wait()
	}
	b.StopTimer()
	held.Release(ctx)
}

// BenchmarkHeartbeat1000 is one heartbeat of a Locker with 1,000 waiters on
// one lock: one script call, whatever the count.
func BenchmarkHeartbeat1000(b *testing.B) {
	srv := redistest.Start(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	holder := benchLocker(b, srv, WithLeaseTTL(time.Hour), WithAutoRenew(false))
	if _, err := holder.Acquire(ctx, "beat"); err != nil {
		b.Fatal(err)
	}
	l := benchLocker(b, srv, WithWaiterTTL(time.Hour), WithLeaseTTL(time.Hour))
	var wg sync.WaitGroup
	queued := make(chan struct{}, 1000)
	for range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.Acquire(ctx, "beat", OnQueued(func(int) { queued <- struct{}{} })) //nolint:errcheck // ends by cancel
		}()
	}
	for range 1000 {
		<-queued
	}
	for b.Loop() {
		l.beat()
	}
	cancel()
	wg.Wait()
}

// BenchmarkScriptTime is the Redis server's own time per call of the
// scripts on the contended path, from INFO commandstats: acquire.lua
// queueing a waiter behind a held lock, and release.lua granting the
// head, for the mutex's and the counted holder store, for a semaphore
// whose waiters are in 1 or in 1,000 groups (WithGroup), all of them
// waiting throughout, and for a mutex whose waiters take the priorities 0
// to 9 in turn (WithPriority). It reports redis-µs/call beside the
// client's ns/op, which includes the round trip, and redis-cmds/call, the
// commands each call ran (the groups' and lanes' holder lookups left out).
func BenchmarkScriptTime(b *testing.B) {
	srv := redistest.Start(b)
	client := srv.Client(b)
	ctx := context.Background()
	for _, bc := range []struct {
		name     string
		kind     *kind
		capacity any
		groups   int
		lanes    int // waiters take priorities 0 to lanes-1 in turn
	}{
		{"mutex", mutexKind, noArg, 0, 0},
		{"semaphore", semaphoreKind, int64(1), 0, 0},
		{"groups=1", semaphoreKind, int64(1), 1, 0},
		{"groups=1000", semaphoreKind, int64(1), 1000, 0},
		{"lanes=10", mutexKind, noArg, 0, 10},
	} {
		l := benchLocker(b, srv)
		ref := l.refs.get(bc.kind, "script-time")
		// Two sessions that live through the benchmark, whose tokens take
		// turns.
		for _, session := range []string{"w0.1", "w1.1"} {
			client.HSet(ctx, ref.sessions+session, "", 1)
			client.PExpire(ctx, ref.sessions+session, time.Hour)
			client.Set(ctx, ref.sessions+session+":w", int64(10000), time.Hour)
		}
		acquire := func(token string) {
			args := ref.call(token, modeWait, noArg, bc.capacity, int64(0), noArg)
			if bc.groups > 0 {
				seq, _ := strconv.Atoi(token[strings.LastIndexByte(token, ':')+1:])
				args = ref.call(token, modeWait, noArg, bc.capacity, int64(0), "g"+strconv.Itoa(seq%bc.groups), int64(1))
			}
			if err := bc.kind.scripts.Acquire.run(ctx, client, args, retried).Err(); err != nil {
				b.Fatal(err)
			}
		}
		release := func(token string) {
			if err := bc.kind.scripts.Release.run(ctx, client, ref.call(token, noArg, noArg), once).Err(); err != nil {
				b.Fatal(err)
			}
		}
		perCall := func(b *testing.B, run func()) {
			client.ConfigResetStat(ctx)
			b.ResetTimer()
			run()
			b.StopTimer()
			var calls, usec, cmds float64
			for name, stat := range client.InfoMap(ctx, "commandstats").Val()["Commandstats"] {
				var n float64
				fmt.Sscanf(stat, "calls=%g", &n)
				switch name {
				case "cmdstat_evalsha":
					fmt.Sscanf(stat, "calls=%g,usec=%g", &calls, &usec)
				case "cmdstat_config|resetstat", "cmdstat_info":
				default:
					cmds += n
				}
			}
			if bc.groups > 0 || bc.lanes > 0 {
				cmds -= float64(b.N) // the holder lookups
			}
			b.ReportMetric(usec/calls, "redis-µs/call")
			b.ReportMetric(cmds/calls, "redis-cmds/call")
		}
		token := func(seq int) string {
			t := "w" + strconv.Itoa(seq%2) + ".1:" + strconv.Itoa(seq)
			if bc.lanes > 0 {
				t += "!" + strconv.Itoa(seq%bc.lanes) + "/30000"
			}
			return t
		}
		holder, seq := token(0), 0
		acquire(holder)
		var waiters []string
		b.Run(bc.name+"/enqueue", func(b *testing.B) {
			perCall(b, func() {
				for range b.N {
					seq++
					acquire(token(seq))
					waiters = append(waiters, token(seq))
				}
			})
		})
		b.Run(bc.name+"/grant", func(b *testing.B) {
			// With groups (lanes), every group (lane) keeps waiters to the
			// end, and the holder is whom the rule chose: read, not assumed.
			for len(waiters) < b.N+2*bc.groups+2*bc.lanes {
				seq++
				acquire(token(seq))
				waiters = append(waiters, token(seq))
			}
			perCall(b, func() {
				for _, next := range waiters[:b.N] {
					release(holder)
					holder = next
					if bc.groups > 0 {
						holder = client.ZRange(ctx, ref.keys[0], 0, 0).Val()[0]
					}
					if bc.lanes > 0 {
						holder = client.Get(ctx, ref.keys[0]).Val()
					}
				}
			})
			waiters = waiters[b.N:]
		})
		client.FlushAll(ctx)
	}
}
