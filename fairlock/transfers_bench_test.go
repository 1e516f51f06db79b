package fairlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/redistest"
)

// BenchmarkTransfers moves money between two of 10 accounts drawn at
// random, each transfer holding both accounts' mutexes while it writes
// both balances (one pipelined round trip), from 8 goroutines on 4
// Lockers (each with a client of its own) on a real redis-server:
//
//   - multimutex: Locker.MultiMutex, whose request joins both queues at
//     once (one MULTI/EXEC);
//   - fixed-order: the common workaround, the two mutexes taken one after
//     the other with Locker.Acquire, in name order (which cannot
//     deadlock), holding the first while it waits for the second.
//
// It reports transfers/s; compare the two of one run, as a ratio:
//
//	go test -run '^$' -bench Transfers -count 3 ./fairlock/
func BenchmarkTransfers(b *testing.B) {
	srv := redistest.Start(b)
	const accounts, lockers = 10, 4
	names := make([]string, accounts)
	for i := range names {
		names[i] = fmt.Sprint("account:", i)
	}
	for _, variant := range []string{"multimutex", "fixed-order"} {
		b.Run(variant, func(b *testing.B) {
			ls := make([]*fairlock.Locker, lockers)
			for i := range ls {
				ls[i] = newLocker(b, srv.Client(b))
			}
			store := srv.Client(b)
			ctx := context.Background()
			var next atomic.Int64
			b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0))) // 8 goroutines on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				l := ls[next.Add(1)%lockers]
				for pb.Next() {
					from, to := rand.IntN(accounts), rand.IntN(accounts-1)
					if to >= from {
						to++
					}
					release, err := lockBoth(ctx, variant, l, names[from], names[to])
					if err != nil {
						b.Error(err)
						return
					}
					pipe := store.Pipeline()
					pipe.IncrBy(ctx, "balance:"+names[from], -1)
					pipe.IncrBy(ctx, "balance:"+names[to], 1)
					if _, err := pipe.Exec(ctx); err != nil {
						b.Error(err)
					}
					if err := release(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "transfers/s")
		})
	}
}

// lockBoth takes the mutexes a and b as variant says, and returns what
// releases them.
func lockBoth(ctx context.Context, variant string, l *fairlock.Locker, a, b string) (func() error, error) {
	if variant == "multimutex" {
		m, err := l.MultiMutex(a, b)
		if err != nil {
			return nil, err
		}
		ml, err := m.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		return func() error { return ml.Release(ctx) }, nil
	}
	ordered := []string{a, b}
	slices.Sort(ordered)
	first, err := l.Acquire(ctx, ordered[0])
	if err != nil {
		return nil, err
	}
	second, err := l.Acquire(ctx, ordered[1])
	if err != nil {
		first.Release(ctx) //nolint:errcheck // the benchmark fails anyway
		return nil, err
	}
	return func() error {
		err := second.Release(ctx)
		if ferr := first.Release(ctx); err == nil {
			err = ferr
		}
		return err
	}, nil
}
