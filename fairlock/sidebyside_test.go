package fairlock_test

// BenchmarkSideBySide is the plain loop a user would write to compare
// fairlock with a naive SET NX lock, kept in the repo so that anyone can
// check the bench's uncontended ratio (bench/, scenario 1) against it. Both
// run in one process, on one redis-server that the benchmark starts (it is
// skipped if redis-server is not installed), taking turns in short slices,
// so that the load of the machine falls on both alike:
//
//	go test -run '^$' -bench SideBySide -benchtime 20s ./fairlock/
//
// -benchtime is the total; each peer gets about half of it, in slices of
// -sidebyside.slice (300 ms by default; after -args). -benchtime 2000x
// runs 2000 cycles of each, a smoke test. The bench (bench/run.sh) runs it
// right after its own uncontended row, from a binary of go test -c. For a CPU profile,
// add -cpuprofile cpu.out; for allocations of both together, -benchmem
// (the per-peer figures below are reported anyway).
//
// A cycle, for each peer, in a user's plain style, each on its own go-redis
// client with PoolSize 1:
//   - naive: SET key token NX PX 10000, then the compare-and-delete script
//     by EVALSHA (go-redis's Script.Run), each call under a fresh
//     context.WithTimeout, cancelled when the call returns. The token is a
//     random prefix and a counter, as fairlock's own (its session and a
//     sequence number), so that neither pays more for its token;
//   - fairlock: Locker.Acquire under a fresh context.WithTimeout, cancelled
//     as soon as Acquire returns, then Lease.Release under another;
//   - floor: the commands fairlock sends for that cycle (FloorCycle), from
//     the same plain loop, with none of fairlock's Go code.
//
// One op is one cycle of each. Reported beside ns/op:
//   - fairlock/naive: fairlock's cycles/s over naive's, each over the time
//     of its own slices (the bench's target: ≥ 1.0);
//   - naive-cycles/s, fairlock-cycles/s;
//   - naive-allocs/cycle, fairlock-allocs/cycle, and B/cycle of each, from
//     runtime.MemStats deltas over each peer's slices (a Locker's
//     heartbeat, once a second, is counted in whichever slice it falls);
//   - naive-redis-µs/cycle, fairlock-redis-µs/cycle: Redis's CPU
//     (used_cpu_sys + used_cpu_user) per cycle over each peer's slices;
//   - slices, slice-ratio-min, -median, -max and -sd: the ratio of each
//     naive slice and the fairlock slice after it, to see the noise (the
//     bench compares its own ratio with this one within it);
//   - fast-half-ratio, slow-half-ratio: the median slice ratio of the
//     pairs whose naive slice ran at or above naive's median rate, and of
//     the others: the VM's fast and slow round-trip regimes, apart;
//   - floor/naive and fairlock/floor: what fairlock's promises cost (its
//     fence, its session and queue checks, in commands and their
//     arguments), and what its own Go code costs, apart;
//   - naive-p10-µs, fairlock-p10-µs, -p50-µs, and p10-ratio (naive's p10
//     cycle over fairlock's): on a machine whose round trips flip between
//     a fast and a slow mode (a VM waking an idle vCPU), the mix of modes
//     moves the cycles/s of both; the fast end compares their own costs.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

var sideBySideSlice = flag.Duration("sidebyside.slice", 300*time.Millisecond, "BenchmarkSideBySide: length of one peer's turn")

// sideBySideRelease is the naive lock's release: compare and delete.
var sideBySideRelease = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// callTimeout is the deadline of each call's context: what a caller would
// give a lock call, far above its round trip.
const callTimeout = 5 * time.Second

// fairlockCycle is fairlock's cycle in a user's plain style: Acquire and
// Release of name, each under a fresh deadline.
func fairlockCycle(l *fairlock.Locker, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	lease, err := l.Acquire(ctx, name)
	cancel()
	if err != nil {
		return err
	}
	ctx, cancel = context.WithTimeout(context.Background(), callTimeout)
	err = lease.Release(ctx)
	cancel()
	return err
}

// sliceRatios are the ratios of each naive slice's rate and the fairlock
// slice's after it, sorted.
func sliceRatios(naive, fl []float64) []float64 {
	var pairs []float64
	for i := range min(len(naive), len(fl)) {
		pairs = append(pairs, fl[i]/naive[i])
	}
	sort.Float64s(pairs)
	return pairs
}

// regimeRatios splits the slice pairs by naive's rate in its slice, the
// round trip's regime at that moment on a VM whose round trips flip between
// a fast and a slow one: the median ratio of the pairs whose naive slice
// ran at or above naive's median rate, and of those below.
func regimeRatios(naive, fl []float64) (fast, slow float64) {
	n := min(len(naive), len(fl))
	sorted := slices.Clone(naive[:n])
	sort.Float64s(sorted)
	var above, below []float64
	for i := range n {
		if naive[i] >= sorted[n/2] {
			above = append(above, fl[i]/naive[i])
		} else {
			below = append(below, fl[i]/naive[i])
		}
	}
	median := func(xs []float64) float64 {
		if len(xs) == 0 {
			return 0
		}
		sort.Float64s(xs)
		return xs[len(xs)/2]
	}
	return median(above), median(below)
}

// sampleSD is the sample standard deviation of xs (0 for fewer than two).
func sampleSD(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	var mean, sd float64
	for _, x := range xs {
		mean += x / float64(len(xs))
	}
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	return math.Sqrt(sd / float64(len(xs)-1))
}

// A sideBySidePeer is one side: its cycle, and what its slices added up to.
type sideBySidePeer struct {
	name           string
	cycle          func() error
	cycles         int
	elapsed        time.Duration
	mallocs, bytes uint64
	redisCPU       time.Duration
	sliceRates     []float64
	// hist counts the cycles by duration, in histBucket steps (the last
	// bucket takes all longer ones): made once, so that timing a cycle
	// allocates nothing.
	hist []int64
}

const (
	histBucket = 100 * time.Nanosecond
	histLen    = 20000 // up to 2 ms
)

// percentile is the q-th percentile of the peer's cycle durations, from
// its histogram, in µs.
func (p *sideBySidePeer) percentile(q float64) float64 {
	var total int64
	for _, n := range p.hist {
		total += n
	}
	want := int64(q / 100 * float64(total))
	var seen int64
	for i, n := range p.hist {
		if seen += n; seen > want {
			return float64(time.Duration(i)*histBucket+histBucket/2) / 1e3
		}
	}
	return 0
}

// BenchmarkSideBySide: see the top of this file.
func BenchmarkSideBySide(b *testing.B) {
	srv := redistest.Start(b)
	newClient := func() *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1})
		b.Cleanup(func() { c.Close() })
		return c
	}
	const name = "sidebyside"

	naiveClient := newClient()
	var prefix [8]byte
	rand.Read(prefix[:]) //nolint:errcheck // never fails on Linux
	tokenBase := hex.EncodeToString(prefix[:]) + ":"
	var seq uint64
	naive := &sideBySidePeer{name: "naive", hist: make([]int64, histLen), cycle: func() error {
		seq++
		token := tokenBase + strconv.FormatUint(seq, 36)
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		ok, err := naiveClient.SetNX(ctx, name, token, 10*time.Second).Result()
		cancel()
		if err != nil || !ok {
			return fmt.Errorf("naive acquire: %v %v", ok, err)
		}
		ctx, cancel = context.WithTimeout(context.Background(), callTimeout)
		err = sideBySideRelease.Run(ctx, naiveClient, []string{name}, token).Err()
		cancel()
		return err
	}}

	locker, err := fairlock.New(newClient())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { locker.Close() })
	fl := &sideBySidePeer{name: "fairlock", hist: make([]int64, histLen), cycle: func() error {
		return fairlockCycle(locker, name)
	}}

	floorLocker, err := fairlock.New(newClient())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { floorLocker.Close() })
	floor := &sideBySidePeer{name: "floor", hist: make([]int64, histLen), cycle: fairlock.FloorCycle(floorLocker, newClient(), name,
		func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), callTimeout)
		})}

	info := newClient()
	redisCPU := func() time.Duration {
		txt, err := info.Info(context.Background(), "cpu").Result()
		if err != nil {
			b.Fatal(err)
		}
		var total float64
		for _, line := range strings.Split(txt, "\n") {
			k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			if k == "used_cpu_sys" || k == "used_cpu_user" {
				f, _ := strconv.ParseFloat(v, 64)
				total += f
			}
		}
		return time.Duration(total * float64(time.Second))
	}

	// slice runs p for one slice, or until it has made its b.N cycles.
	slice := func(p *sideBySidePeer, d time.Duration, count bool) {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		cpu0 := redisCPU()
		n := 0
		start := time.Now()
		last := start
		for (!count || p.cycles+n < b.N) && last.Sub(start) < d {
			if err := p.cycle(); err != nil {
				b.Fatalf("%s: %v", p.name, err)
			}
			now := time.Now()
			if count {
				p.hist[min(int(now.Sub(last)/histBucket), histLen-1)]++
			}
			last = now
			n++
		}
		el := last.Sub(start)
		cpu1 := redisCPU()
		runtime.ReadMemStats(&m1)
		if !count {
			return
		}
		p.cycles += n
		p.elapsed += el
		p.mallocs += m1.Mallocs - m0.Mallocs
		p.bytes += m1.TotalAlloc - m0.TotalAlloc
		p.redisCPU += cpu1 - cpu0
		p.sliceRates = append(p.sliceRates, float64(n)/el.Seconds())
	}

	// Warm-up: a slice each, not counted. The first moments after idle run
	// slow on a shared machine, and the first calls open connections, load
	// scripts and open fairlock's session.
	slice(naive, *sideBySideSlice, false)
	slice(fl, *sideBySideSlice, false)
	slice(floor, *sideBySideSlice, false)
	runtime.GC()

	b.ResetTimer()
	for naive.cycles < b.N || fl.cycles < b.N || floor.cycles < b.N {
		for _, p := range []*sideBySidePeer{naive, fl, floor} {
			if p.cycles < b.N {
				slice(p, *sideBySideSlice, true)
			}
		}
	}
	b.StopTimer()

	rate := func(p *sideBySidePeer) float64 { return float64(p.cycles) / p.elapsed.Seconds() }
	b.ReportMetric(rate(fl)/rate(naive), "fairlock/naive")
	// The ratio of each naive slice and the fairlock slice after it: their
	// spread is the noise of the figure above.
	pairs := sliceRatios(naive.sliceRates, fl.sliceRates)
	sd := sampleSD(pairs)
	b.ReportMetric(float64(len(pairs)), "slices")
	b.ReportMetric(pairs[0], "slice-ratio-min")
	b.ReportMetric(pairs[len(pairs)/2], "slice-ratio-median")
	b.ReportMetric(pairs[len(pairs)-1], "slice-ratio-max")
	b.ReportMetric(sd, "slice-ratio-sd")
	fast, slow := regimeRatios(naive.sliceRates, fl.sliceRates)
	b.ReportMetric(fast, "fast-half-ratio")
	b.ReportMetric(slow, "slow-half-ratio")
	// The fast end of the cycles: on a VM whose round trips flip between
	// a fast and a slow mode, the p10 compares the peers' own costs.
	b.ReportMetric(naive.percentile(10)/fl.percentile(10), "p10-ratio")
	b.ReportMetric(rate(floor)/rate(naive), "floor/naive")
	b.ReportMetric(rate(fl)/rate(floor), "fairlock/floor")
	for _, p := range []*sideBySidePeer{naive, fl, floor} {
		n := float64(p.cycles)
		b.ReportMetric(p.percentile(10), p.name+"-p10-µs")
		b.ReportMetric(p.percentile(50), p.name+"-p50-µs")
		b.ReportMetric(rate(p), p.name+"-cycles/s")
		b.ReportMetric(float64(p.mallocs)/n, p.name+"-allocs/cycle")
		b.ReportMetric(float64(p.bytes)/n, p.name+"-B/cycle")
		b.ReportMetric(float64(p.redisCPU.Microseconds())/n, p.name+"-redis-µs/cycle")
	}
}
