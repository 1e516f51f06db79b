package main

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ---------------------------------------------------------------- limit

type LimitResult struct {
	PingP50us        float64 `json:"ping_p50_us"`
	PingP99us        float64 `json:"ping_p99_us"`
	PingOpsPerSec    float64 `json:"ping_ops_per_s"`
	PingColdP50us    float64 `json:"ping_after_1ms_idle_p50_us"`
	EvalshaP50us     float64 `json:"evalsha_p50_us"`
	EvalshaOpsPerSec float64 `json:"evalsha_ops_per_s"`
	EvalshaPipelined float64 `json:"evalsha_pipelined_ops_per_s"`
	PipelineDepth    int     `json:"pipeline_depth"`
	NotifyP50us      float64 `json:"notify_p50_us"`
	NotifyP99us      float64 `json:"notify_p99_us"`
}

// a script of the size of a lock acquire: one SET NX PX and a TIME call.
var limitScript = redis.NewScript(`local t = redis.call('TIME') redis.call('SET', KEYS[1], ARGV[1], 'PX', 10000) return t[1]`)

func runLimit(e *env, dur time.Duration) (LimitResult, error) {
	var r LimitResult
	cl := redis.NewClient(&redis.Options{Addr: e.RedisAddr, PoolSize: 1})
	defer cl.Close()
	ctx := context.Background()
	if err := cl.Ping(ctx).Err(); err != nil {
		return r, err
	}
	lat := make([]int64, 0, 1<<16)
	t0 := mono()
	end := t0 + int64(dur)
	for mono() < end {
		a := mono()
		if err := cl.Ping(ctx).Err(); err != nil {
			return r, err
		}
		lat = append(lat, mono()-a)
	}
	r.PingP50us, r.PingP99us = us(percentile(lat, 50)), us(percentile(lat, 99))
	r.PingOpsPerSec = float64(len(lat)) / (float64(mono()-t0) / 1e9)

	// A round trip made after 1 ms of idleness, as a hand-off after a 1 ms
	// hold is: caches and schedulers are cold.
	lat = lat[:0]
	end = mono() + int64(dur/2)
	for mono() < end {
		time.Sleep(time.Millisecond)
		a := mono()
		if err := cl.Ping(ctx).Err(); err != nil {
			return r, err
		}
		lat = append(lat, mono()-a)
	}
	r.PingColdP50us = us(percentile(lat, 50))

	if err := limitScript.Load(ctx, cl).Err(); err != nil {
		return r, err
	}
	lat = lat[:0]
	t0 = mono()
	end = t0 + int64(dur)
	for mono() < end {
		a := mono()
		if err := limitScript.EvalSha(ctx, cl, []string{"limit:k"}, "v").Err(); err != nil {
			return r, err
		}
		lat = append(lat, mono()-a)
	}
	r.EvalshaP50us = us(percentile(lat, 50))
	r.EvalshaOpsPerSec = float64(len(lat)) / (float64(mono()-t0) / 1e9)

	r.PipelineDepth = 64
	n := 0
	t0 = mono()
	end = t0 + int64(dur/2)
	for mono() < end {
		pipe := cl.Pipeline()
		for i := 0; i < r.PipelineDepth; i++ {
			limitScript.EvalSha(ctx, pipe, []string{"limit:k"}, "v")
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return r, err
		}
		n += r.PipelineDepth
	}
	r.EvalshaPipelined = float64(n) / (float64(mono()-t0) / 1e9)

	// The floor of any pub/sub hand-off: from the PUBLISH call to a second
	// goroutine woken by the subscriber's reader (the path of a grant message).
	sub := redis.NewClient(&redis.Options{Addr: e.RedisAddr})
	defer sub.Close()
	ps := sub.Subscribe(ctx, "limit:notify")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		return r, err
	}
	got := make(chan int64)
	go func() {
		for {
			if _, err := ps.ReceiveMessage(ctx); err != nil {
				close(got)
				return
			}
			got <- mono()
		}
	}()
	lat = lat[:0]
	end = mono() + int64(dur/2)
	for mono() < end {
		a := mono()
		if err := cl.Publish(ctx, "limit:notify", "x").Err(); err != nil {
			return r, err
		}
		b, ok := <-got
		if !ok {
			break
		}
		lat = append(lat, b-a)
	}
	r.NotifyP50us, r.NotifyP99us = us(percentile(lat, 50)), us(percentile(lat, 99))
	return r, nil
}

// ---------------------------------------------------------------- uncontended

type UncontendedResult struct {
	Peer         string  `json:"peer"`
	Cycles       int     `json:"cycles"`
	CyclesPerSec float64 `json:"cycles_per_s"`
	// P10us is the fast end of the cycle's latency: on this VM the cycles
	// fall in two modes, CPU-bound (PING ≈ 8 µs) and wake-up-bound (PING
	// ≈ 60 µs), whose mix moves from second to second; the p10 is the
	// cost of a cycle in the fast mode alone.
	P10us               float64 `json:"p10_us"`
	P50us               float64 `json:"p50_us"`
	P99us               float64 `json:"p99_us"`
	RoundTripsPerCycle  float64 `json:"round_trips_per_cycle"`
	ServerCmdsPerCycle  float64 `json:"server_cmds_per_cycle"`
	ServerCPUusPerCycle float64 `json:"server_cpu_us_per_cycle"`
	LocalPingus         float64 `json:"local_ping_p50_us"`
	// Context says how each call got its context: "deadline per call" (a
	// fresh context.WithTimeout for each Lock and each unlock, cancelled
	// when the call returns, as a plain loop does) or "Background".
	Context  string `json:"context"`
	PoolSize int    `json:"pool_size"` // go-redis PoolSize of the client, 0 for its default
	// TurnRates are the cycles/s of each turn, in order: the peers' turns
	// alternate, so turn i of two rows ran side by side.
	TurnRates []float64 `json:"turn_rates,omitempty"`
	// Cmdstats are Redis's commands per cycle, UsecPer its µs per call of
	// each (INFO commandstats over the row's turns).
	Cmdstats map[string]float64 `json:"cmdstats_per_cycle,omitempty"`
	UsecPer  map[string]float64 `json:"usec_per_call,omitempty"`
	Note     string             `json:"note,omitempty"`
}

// An uncontendedRow is one row of the uncontended scenario: a peer, called
// with a fresh context with a deadline for each call (as callers pass) or
// with context.Background().
type uncontendedRow struct {
	p          peer
	name       string
	background bool
}

// uncontendedRun accumulates one row's measurement over its turns.
type uncontendedRun struct {
	set    *workerSet
	lat    []int64
	el     int64
	cs     countSnap
	tally  serverTally
	cpu    int64
	pings  []float64
	failed bool // setup or a call failed: no more turns
	result UncontendedResult
}

// callTimeout is the deadline of each uncontended call's context: what a
// caller gives a lock call, far above its round trip.
const callTimeout = 5 * time.Second

// runUncontended measures every row in turns: rounds passes over all rows,
// dur/rounds each. The load of this shared machine drifts over seconds, and
// measuring peers one after another let that drift decide their ratio;
// taking turns spreads it over all of them alike. Each row's worker has
// its own client with a pool of poolSize connections (0: go-redis's
// default), as BenchmarkSideBySide in ../fairlock has (1).
func runUncontended(rows []uncontendedRow, e *env, mon *monitor, dur time.Duration, rounds, poolSize int) []UncontendedResult {
	eu := *e
	eu.PoolSize = poolSize
	runs := make([]*uncontendedRun, len(rows))
	for i, row := range rows {
		run := &uncontendedRun{result: UncontendedResult{Peer: row.name, Context: "deadline per call", PoolSize: poolSize}}
		if row.background {
			run.result.Context, run.result.Note = "Background", "context.Background()"
		}
		set, err := newWorkerSet(row.p, &eu, 1)
		if err != nil {
			run.result.Note, run.failed = "setup: "+err.Error(), true
		} else {
			run.set = set
			defer set.close()
		}
		runs[i] = run
	}
	turn := dur / time.Duration(max(rounds, 1))
	inTurns(rounds, len(rows), func(i int) {
		if !runs[i].failed {
			uncontendedTurn(rows[i], runs[i], mon, turn)
		}
	})
	out := make([]UncontendedResult, len(rows))
	for i, row := range rows {
		run := runs[i]
		r := run.result
		n := float64(len(run.lat))
		r.Cycles = len(run.lat)
		if n > 0 {
			r.CyclesPerSec = n / (float64(run.el) / 1e9)
			r.P10us, r.P50us, r.P99us = us(percentile(run.lat, 10)), us(percentile(run.lat, 50)), us(percentile(run.lat, 99))
			r.RoundTripsPerCycle = float64(run.cs.RoundTrips) / n
			if row.p.Redis {
				r.ServerCmdsPerCycle = float64(run.tally.cmds) / n
				r.Cmdstats, r.UsecPer = run.tally.perCycle(n)
			}
			r.ServerCPUusPerCycle = float64(run.cpu) / n
			r.LocalPingus = median(run.pings)
		}
		out[i] = r
	}
	return out
}

// median is the middle value of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// uncontendedTurn runs one turn of a row for d.
func uncontendedTurn(row uncontendedRow, run *uncontendedRun, mon *monitor, d time.Duration) {
	w := run.set.ws[0]
	ctx := context.Background()
	run.pings = append(run.pings, mon.localPing(ctx, 100*time.Millisecond))
	s0, _ := mon.snap(ctx)
	c0 := run.set.c.snap()
	n0 := len(run.lat)
	t0 := mono()
	end := t0 + int64(d)
	for mono() < end {
		a := mono()
		if err := lockCycle(w, "uncontended", row.background); err != nil {
			run.result.Note, run.failed = err.Error(), true
			break
		}
		run.lat = append(run.lat, mono()-a)
	}
	el := mono() - t0
	run.el += el
	run.result.TurnRates = append(run.result.TurnRates, float64(len(run.lat)-n0)/(float64(el)/1e9))
	cs := run.set.c.snap().sub(c0)
	run.cs.RoundTrips += cs.RoundTrips
	s1, _ := mon.snap(ctx)
	sd := diffServer(s0, s1)
	run.tally.add(sd)
	if row.p.Redis {
		run.cpu += sd.CPUus
	} else {
		run.cpu += sd.EtcdCPUus
	}
}

// ---------------------------------------------------------------- FIFO

type FIFOResult struct {
	Peer          string  `json:"peer"`
	Waiters       int     `json:"waiters"`
	Rounds        int     `json:"rounds"`
	SpacingMs     float64 `json:"spacing_ms"`
	Inversions    int     `json:"inversions"`
	MaxInversions int     `json:"max_inversions"`
	DrainMs       float64 `json:"drain_ms"` // mean per round
	PerHandoffus  float64 `json:"per_handoff_us"`
	GapP50us      float64 `json:"gap_p50_us"`
	LocalPingus   float64 `json:"local_ping_p50_us"`
	Note          string  `json:"note,omitempty"`
}

func runFIFO(p peer, e *env, mon *monitor, n, rounds int, spacing, hold time.Duration) FIFOResult {
	r := FIFOResult{Peer: p.Name, Waiters: n, Rounds: rounds, SpacingMs: spacing.Seconds() * 1e3, MaxInversions: rounds * n * (n - 1) / 2}
	set, err := newWorkerSet(p, e, n+1)
	if err != nil {
		r.Note = "setup: " + err.Error()
		return r
	}
	defer set.close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r.LocalPingus = mon.localPing(ctx, 200*time.Millisecond)
	var drains, gaps []int64
	for round := 0; round < rounds; round++ {
		name := "fifo-" + strconv.Itoa(round)
		hu, err := set.ws[n].Lock(ctx, name)
		if err != nil {
			r.Note = err.Error()
			return r
		}
		recs := make([]rec, n)
		var wg sync.WaitGroup
		base := mono()
		for i := 0; i < n; i++ {
			sleepUntil(base + int64(i)*int64(spacing))
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				t0 := mono()
				u, err := set.ws[i].Lock(ctx, name)
				tg := mono()
				if err != nil {
					return
				}
				if hold > 0 {
					time.Sleep(hold)
				}
				recs[i] = rec{W: i, T0: t0, TG: tg, TR: mono()}
				u(ctx)
			}(i)
		}
		sleepUntil(base + int64(n)*int64(spacing))
		tr0 := mono()
		if err := hu(ctx); err != nil {
			r.Note = "holder release: " + err.Error()
		}
		wg.Wait()
		// inversions: pairs granted against arrival order
		var last int64
		for i := 0; i < n; i++ {
			if recs[i].TG == 0 {
				r.Note = "a waiter failed"
				continue
			}
			last = max(last, recs[i].TG)
			for j := i + 1; j < n; j++ {
				if recs[j].TG != 0 && recs[j].TG < recs[i].TG {
					r.Inversions++
				}
			}
		}
		drains = append(drains, last-tr0)
		sorted := append([]rec(nil), recs...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].TG < sorted[j].TG })
		prev := tr0
		for _, x := range sorted {
			if x.TG == 0 {
				continue
			}
			gaps = append(gaps, x.TG-prev)
			prev = x.TR
		}
	}
	var sum int64
	for _, d := range drains {
		sum += d
	}
	r.DrainMs = float64(sum) / float64(len(drains)) / 1e6
	r.PerHandoffus = r.DrainMs * 1e3 / float64(n)
	r.GapP50us = us(percentile(gaps, 50))
	return r
}

// ---------------------------------------------------------------- scale

type ScaleResult struct {
	Peer                string  `json:"peer"`
	Case                string  `json:"case"`
	Capacity            int     `json:"capacity,omitempty"` // a semaphore's: its holders take 1 permit each
	Names               int     `json:"names"`
	PerName             int     `json:"per_name"`
	Waiters             int     `json:"waiters"` // per round
	Rounds              int     `json:"rounds,omitempty"`
	Granted             int     `json:"granted"`
	EnqueueMs           float64 `json:"enqueue_ms"` // mean per round
	DrainMs             float64 `json:"drain_ms"`   // mean per round
	PerGrantus          float64 `json:"per_grant_us"`
	RoundTripsPerGrant  float64 `json:"round_trips_per_grant"`
	ServerCmdsPerGrant  float64 `json:"server_cmds_per_grant"`
	DrainCmdsPerGrant   float64 `json:"drain_server_cmds_per_grant"`
	HeapPerWaiter       float64 `json:"heap_bytes_per_waiter"`
	HeapStackPerWaiter  float64 `json:"heap_stack_bytes_per_waiter"`
	PubsubConns         int     `json:"pubsub_conns"`
	Lockers             int     `json:"lockers"`
	Dials               int64   `json:"dials"`
	UsedMemoryPeak      int64   `json:"used_memory_peak"`
	UsedMemoryPerWaiter float64 `json:"used_memory_per_waiter"`
	DrainRTPerGrant     float64 `json:"drain_round_trips_per_grant"`
	ServerCPUusPerGrant float64 `json:"server_cpu_us_per_grant"`
	DrainCPUusPerGrant  float64 `json:"drain_server_cpu_us_per_grant"`
	runDetail
}

type queuedReporter interface {
	Queued(ctx context.Context, name string) (int, error)
}

// A holdFunc takes the grant that the waiters of runScale queue behind,
// on the holder worker.
type holdFunc func(ctx context.Context, holder worker, name string) (unlockFunc, error)

// runScale queues names × perName waiters of one worker behind one grant
// per name of another (hold; nil is the holder's Lock), then releases those
// and measures the drain. It does so rounds times, one round after another
// on new names, measuring the cost per grant over all of them; the
// memory, the peak and the drain-only figures are the last round's.
func runScale(p peer, e *env, mon *monitor, names, perName, rounds int, hold holdFunc, caseName string) ScaleResult {
	N := names * perName
	rounds = max(rounds, 1)
	r := ScaleResult{Peer: p.Name, Case: caseName, Names: names, PerName: perName, Waiters: N, Rounds: rounds, Lockers: 3}
	if !p.Concurrent {
		r.Note = "skipped: one client cannot run concurrent waiters"
		return r
	}
	if hold == nil {
		hold = func(ctx context.Context, w worker, name string) (unlockFunc, error) { return w.Lock(ctx, name) }
	}
	// holder and waiters: two workers (for fairlock: two Lockers); a third,
	// uncounted probe checks the queue length.
	set, err := newWorkerSet(p, e, 2)
	if err != nil {
		r.Note = "setup: " + err.Error()
		return r
	}
	defer set.close()
	probeC := &counters{}
	probe, err := p.New(e, probeC)
	if err != nil {
		r.Note = "probe: " + err.Error()
		return r
	}
	defer probe.Close()
	holder, w := set.ws[0], set.ws[1]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	nameOf := func(round, i int) string {
		n := "scale-" + caseName
		if rounds > 1 {
			n += "-r" + strconv.Itoa(round)
		}
		if names > 1 {
			n += "-" + strconv.Itoa(i)
		}
		return n
	}

	r.LocalPingus = mon.localPing(ctx, 200*time.Millisecond)
	mon.slowlogReset(ctx)
	s0, _ := mon.snap(ctx)
	c0 := set.c.snap()
	p0 := probeC.commands.Load()
	var (
		sPeak        serverSnap
		pPeak        int64
		cPeak        countSnap
		granted      atomic.Int64
		errs         atomic.Int64
		enqueue, drn int64
	)
	for round := range rounds {
		last := round == rounds-1
		var m0, m1 runtime.MemStats
		if last {
			for i := 0; i < 4; i++ {
				runtime.GC()
			}
			runtime.ReadMemStats(&m0)
		}
		unlocks := make([]unlockFunc, names)
		for i := range unlocks {
			if unlocks[i], err = hold(ctx, holder, nameOf(round, i)); err != nil {
				r.Note = "holder: " + err.Error()
				return r
			}
		}
		var (
			wg     sync.WaitGroup
			called atomic.Int64
			lastTG atomic.Int64
		)
		tEnq := mono()
		for i := 0; i < N; i++ {
			wg.Add(1)
			go func(name string) {
				defer wg.Done()
				called.Add(1)
				u, err := w.Lock(ctx, name)
				if err != nil {
					errs.Add(1)
					return
				}
				t := mono()
				for {
					l := lastTG.Load()
					if t <= l || lastTG.CompareAndSwap(l, t) {
						break
					}
				}
				granted.Add(1)
				u(ctx)
			}(nameOf(round, i%names))
		}
		// wait until every waiter is in the queue
		for called.Load() < int64(N) {
			time.Sleep(5 * time.Millisecond)
		}
		if q, ok := probe.(queuedReporter); ok {
			for i := 0; i < names; i++ {
				for {
					n, err := q.Queued(ctx, nameOf(round, i))
					if err != nil {
						r.Note = "inspect: " + err.Error()
						break
					}
					if n >= perName || ctx.Err() != nil {
						break
					}
					time.Sleep(2 * time.Millisecond)
				}
			}
		} else {
			time.Sleep(200 * time.Millisecond)
		}
		enqueue += mono() - tEnq
		if last {
			// several GCs: each may halve a stack that is mostly unused, as
			// it would be during a long wait
			for i := 0; i < 4; i++ {
				runtime.GC()
			}
			runtime.ReadMemStats(&m1)
			r.HeapPerWaiter = float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(N)
			r.HeapStackPerWaiter = float64(int64(m1.HeapAlloc+m1.StackInuse)-int64(m0.HeapAlloc+m0.StackInuse)) / float64(N)
			sPeak, _ = mon.snap(ctx)
			r.UsedMemoryPeak = sPeak.UsedMemory
			r.UsedMemoryPerWaiter = float64(sPeak.UsedMemory-s0.UsedMemory) / float64(N)
			r.PubsubConns, _ = mon.pubsubClients(ctx)
			pPeak = probeC.commands.Load()
			cPeak = set.c.snap()
		}

		// drain
		tr0 := mono()
		for _, u := range unlocks {
			if err := u(ctx); err != nil {
				r.Note = "holder release: " + err.Error()
			}
		}
		wg.Wait()
		drn += lastTG.Load() - tr0
	}
	r.EnqueueMs = float64(enqueue) / float64(rounds) / 1e6
	r.DrainMs = float64(drn) / float64(rounds) / 1e6
	r.Granted = int(granted.Load())
	if r.Granted > 0 {
		r.PerGrantus = float64(drn) / 1e3 / float64(r.Granted)
	}
	s1, _ := mon.snap(ctx)
	cs := set.c.snap().sub(c0)
	r.Dials = cs.Dials
	r.Slowlog = mon.slowlog(ctx, 5)
	sd := diffServer(s0, s1)
	probeCmds := probeC.commands.Load() - p0
	sdDrain := diffServer(sPeak, s1)
	if n := float64(r.Granted); n > 0 {
		lastN := float64(min(r.Granted, N)) // the drain-only figures are the last round's
		r.RoundTripsPerGrant = float64(cs.RoundTrips) / n
		r.ServerCmdsPerGrant = float64(sd.Commands-probeCmds) / n
		r.DrainCmdsPerGrant = float64(sdDrain.Commands-(probeC.commands.Load()-pPeak)) / lastN
		r.DrainRTPerGrant = float64(set.c.snap().sub(cPeak).RoundTrips) / lastN
		r.ServerCPUusPerGrant = float64(sd.CPUus) / n
		r.DrainCPUusPerGrant = float64(sdDrain.CPUus) / lastN
	}
	r.Cmdstats = sd.Cmdstats
	r.ClientCalls = cs.Names
	r.EvalUsec = sd.UsecPer["evalsha"]
	if e := errs.Load(); e > 0 {
		r.Note += fmt.Sprintf(" %d waiters failed", e)
	}
	return r
}
