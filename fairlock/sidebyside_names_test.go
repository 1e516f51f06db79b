package fairlock_test

// BenchmarkSideBySideManyNames is the other shape of the side-by-side
// loop: many names at once, where what limits both peers is the work each
// cycle costs Redis and the client, not the round trip:
//
//	go test -run '^$' -bench SideBySideManyNames -benchtime 20s ./fairlock/
//
// BenchmarkSideBySideManyNamesCluster is the same on a 3-primary Redis
// Cluster (one ClusterClient; Redis's figures summed over the primaries).
// -sidebyside.workers (16) goroutines each cycle a name of their own, all
// on one shared go-redis client (its default pool): naive with SET NX PX and the
// compare-and-delete script, fairlock with one Locker's Acquire and
// Release, each call under a fresh context.WithTimeout. The peers take
// turns in slices of -sidebyside.slice, as in BenchmarkSideBySide. One op
// is one cycle of each. Reported:
//   - fairlock/naive: cycles/s over naive's (the target: ≥ 0.95), and
//     slices and slice-ratio-sd, the spread of that ratio over the pairs
//     of slices;
//   - redis-ratio and client-ratio: fairlock's Redis CPU and client CPU
//     per cycle over naive's (the targets: ≤ 1.25 each);
//   - for each peer, cycles/s, redis-µs/cycle (used_cpu_sys +
//     used_cpu_user of INFO cpu), client-µs/cycle (this process's
//     getrusage, both peers' goroutines and go-redis's included) and
//     cmds/cycle (total_commands_processed of INFO stats, less the INFO
//     calls that read it), and calls/trip, the commands the client sent
//     per round trip (fairlock's batches: batch.go).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

var sideBySideWorkers = flag.Int("sidebyside.workers", 16, "BenchmarkSideBySideManyNames: workers, each cycling a name of its own")

// A manyNamesPeer is one side of the many-names shape: a worker's cycle on
// its name, and what the slices added up to.
type manyNamesPeer struct {
	name                string
	cycle               func(worker int) error
	cycles              int64
	elapsed             time.Duration
	redisCPU, clientCPU time.Duration
	commands            int64
	trips, calls        int64
	sliceRates          []float64
}

// tripCounter counts a client's round trips, the commands they carry, and
// the most one carried.
type tripCounter struct{ trips, calls, largest atomic.Int64 }

func (*tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (tc *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		tc.trips.Add(1)
		tc.calls.Add(1)
		return next(ctx, cmd)
	}
}

func (tc *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		tc.trips.Add(1)
		tc.calls.Add(int64(len(cmds)))
		for n := int64(len(cmds)); n > tc.largest.Load(); {
			if tc.largest.CompareAndSwap(tc.largest.Load(), n) {
				break
			}
		}
		return next(ctx, cmds)
	}
}

// redisStats reads the CPU time and the commands run of the servers cs,
// summed.
func redisStats(b *testing.B, cs []*redis.Client) (time.Duration, int64) {
	var cpu float64
	var commands int64
	for _, c := range cs {
		txt, err := c.Info(context.Background(), "cpu", "stats").Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(txt, "\n") {
			k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			switch k {
			case "used_cpu_sys", "used_cpu_user":
				f, _ := strconv.ParseFloat(v, 64)
				cpu += f
			case "total_commands_processed":
				n, _ := strconv.ParseInt(v, 10, 64)
				commands += n
			}
		}
	}
	return time.Duration(cpu * float64(time.Second)), commands
}

// processCPU is this process's CPU time, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSideBySideManyNames: see the top of this file.
func BenchmarkSideBySideManyNames(b *testing.B) {
	srv := redistest.Start(b)
	shared := redis.NewClient(&redis.Options{Addr: srv.Addr})
	info := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1})
	b.Cleanup(func() { shared.Close(); info.Close() })
	trips := &tripCounter{}
	shared.AddHook(trips)
	manyNames(b, shared, trips, []*redis.Client{info})
}

// BenchmarkSideBySideManyNamesCluster: see the top of this file.
func BenchmarkSideBySideManyNamesCluster(b *testing.B) {
	cluster := redistest.StartCluster(b)
	// fairlock sends its batches on each primary's own client, so the trips
	// are counted there.
	trips := &tripCounter{}
	shared := cluster.Client(b, nil)
	shared.OnNewNode(func(c *redis.Client) { c.AddHook(trips) })
	var infos []*redis.Client
	for _, primary := range cluster.Primaries(b) {
		info := redis.NewClient(&redis.Options{Addr: primary.Addr, PoolSize: 1})
		b.Cleanup(func() { info.Close() })
		infos = append(infos, info)
	}
	manyNames(b, shared, trips, infos)
}

// manyNames runs the many-names shape on shared, whose round trips trips
// counts, reading Redis's figures from infos.
func manyNames(b *testing.B, shared redis.UniversalClient, trips *tripCounter, infos []*redis.Client) {
	workers := *sideBySideWorkers
	names := make([]string, workers)
	for i := range names {
		names[i] = fmt.Sprintf("names-%d", i)
	}

	var prefix [8]byte
	rand.Read(prefix[:]) //nolint:errcheck // never fails on Linux
	tokenBase := hex.EncodeToString(prefix[:]) + ":"
	seqs := make([]uint64, workers)
	naive := &manyNamesPeer{name: "naive", cycle: func(w int) error {
		seqs[w]++
		token := tokenBase + strconv.Itoa(w) + ":" + strconv.FormatUint(seqs[w], 36)
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		ok, err := shared.SetNX(ctx, names[w], token, 10*time.Second).Result()
		cancel()
		if err != nil || !ok {
			return fmt.Errorf("naive acquire: %v %v", ok, err)
		}
		ctx, cancel = context.WithTimeout(context.Background(), callTimeout)
		err = sideBySideRelease.Run(ctx, shared, []string{names[w]}, token).Err()
		cancel()
		return err
	}}

	locker, err := fairlock.New(shared)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { locker.Close() })
	fl := &manyNamesPeer{name: "fairlock", cycle: func(w int) error { return fairlockCycle(locker, names[w]) }}

	// slice runs p's workers together for d, or until p has made its b.N
	// cycles between them.
	slice := func(p *manyNamesPeer, d time.Duration, count bool) {
		rcpu0, cmds0 := redisStats(b, infos)
		ccpu0 := processCPU(b)
		trips0, calls0 := trips.trips.Load(), trips.calls.Load()
		start := time.Now()
		var mu sync.Mutex
		var n int64
		var failed error
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Since(start) < d {
					mu.Lock()
					stop := failed != nil || (count && p.cycles+n >= int64(b.N))
					mu.Unlock()
					if stop {
						return
					}
					err := p.cycle(w)
					mu.Lock()
					n++
					if err != nil && failed == nil {
						failed = err
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		el := time.Since(start)
		ccpu1 := processCPU(b)
		rcpu1, cmds1 := redisStats(b, infos)
		if failed != nil {
			b.Fatalf("%s: %v", p.name, failed)
		}
		if !count {
			return
		}
		p.cycles += n
		p.elapsed += el
		p.redisCPU += rcpu1 - rcpu0
		p.clientCPU += ccpu1 - ccpu0
		p.commands += cmds1 - cmds0 - 1 // the INFO that read cmds1
		p.trips += trips.trips.Load() - trips0
		p.calls += trips.calls.Load() - calls0
		p.sliceRates = append(p.sliceRates, float64(n)/el.Seconds())
	}

	slice(naive, *sideBySideSlice, false)
	slice(fl, *sideBySideSlice, false)

	b.ResetTimer()
	for naive.cycles < int64(b.N) || fl.cycles < int64(b.N) {
		if naive.cycles < int64(b.N) {
			slice(naive, *sideBySideSlice, true)
		}
		if fl.cycles < int64(b.N) {
			slice(fl, *sideBySideSlice, true)
		}
	}
	b.StopTimer()

	rate := func(p *manyNamesPeer) float64 { return float64(p.cycles) / p.elapsed.Seconds() }
	perCycle := func(d time.Duration, p *manyNamesPeer) float64 {
		return float64(d.Nanoseconds()) / 1e3 / float64(p.cycles)
	}
	b.ReportMetric(rate(fl)/rate(naive), "fairlock/naive")
	b.ReportMetric(perCycle(fl.redisCPU, fl)/perCycle(naive.redisCPU, naive), "redis-ratio")
	b.ReportMetric(perCycle(fl.clientCPU, fl)/perCycle(naive.clientCPU, naive), "client-ratio")
	// The spread of the ratio of each naive slice and the fairlock slice
	// after it: the noise of fairlock/naive, for the bench's comparison.
	pairs := sliceRatios(naive.sliceRates, fl.sliceRates)
	b.ReportMetric(float64(len(pairs)), "slices")
	b.ReportMetric(sampleSD(pairs), "slice-ratio-sd")
	for _, p := range []*manyNamesPeer{naive, fl} {
		b.ReportMetric(rate(p), p.name+"-cycles/s")
		b.ReportMetric(perCycle(p.redisCPU, p), p.name+"-redis-µs/cycle")
		b.ReportMetric(perCycle(p.clientCPU, p), p.name+"-client-µs/cycle")
		b.ReportMetric(float64(p.commands)/float64(p.cycles), p.name+"-cmds/cycle")
		b.ReportMetric(float64(p.calls)/float64(p.trips), p.name+"-calls/trip")
	}
}
