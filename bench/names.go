package main

import (
	"context"
	"flag"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// NamesSide is one peer's figures in the many-names shape, per cycle: a
// row of the bench's names scenario, and one side of what
// BenchmarkSideBySideManyNames reports, so that both read alike.
type NamesSide struct {
	CyclesPerSec float64 `json:"cycles_per_s"`
	RedisCPUus   float64 `json:"redis_cpu_us_per_cycle"`  // used_cpu_sys + used_cpu_user
	ClientCPUus  float64 `json:"client_cpu_us_per_cycle"` // the bench process's getrusage
	RedisCmds    float64 `json:"redis_cmds_per_cycle"`    // total_commands_processed, the INFO calls left out
}

// NamesResult is one peer's row of the names scenario: workers, each
// cycling a name of its own (acquire, release, no hold), all on one
// shared client, the peers taking turns. Where many names are busy at
// once, no peer waits for another's grant: what sets the pace is the CPU
// each cycle costs Redis and the client, which the uncontended row (one
// worker, bound by the round trip) hides.
type NamesResult struct {
	Peer    string `json:"peer"`
	Workers int    `json:"workers"`
	Cycles  int64  `json:"cycles"`
	NamesSide
	RoundTripsPerCycle float64 `json:"round_trips_per_cycle"`
	// Conns are the connections the shared client dialled, its pool and
	// (fairlock) pub/sub, the warm-up's included.
	Conns int64 `json:"conns"`
	// TurnRates are the cycles/s of each turn, in order: turn i of two
	// rows ran one right after the other.
	TurnRates []float64 `json:"turn_rates,omitempty"`
	// Cmdstats are Redis's commands per cycle, UsecPer its µs per call.
	Cmdstats    map[string]float64 `json:"cmdstats_per_cycle,omitempty"`
	UsecPer     map[string]float64 `json:"usec_per_call,omitempty"`
	LocalPingus float64            `json:"local_ping_p50_us"`
	Note        string             `json:"note,omitempty"`
}

// namesRun accumulates one row's measurement over its turns.
type namesRun struct {
	set       *workerSet
	tally     serverTally
	cycles    int64
	el        int64 // ns in the row's turns
	redisCPU  int64 // µs
	clientCPU int64 // ns
	rt        int64
	failed    bool // setup or a call failed: no more turns
	result    NamesResult
}

// namesTurnOut is what one turn of a row measured.
type namesTurnOut struct {
	cycles, el, clientCPU int64
	sd                    serverDelta
	cs                    countSnap
	err                   error
}

// runNames measures each peer's row: one worker (one client; for fairlock
// one Locker) per peer, shared by workers goroutines on names of their
// own. After one unmeasured turn each (the pool dials its connections),
// the peers take rounds turns of dur/rounds each.
func runNames(peers []peer, e *env, mon *monitor, workers int, dur time.Duration, rounds int) []NamesResult {
	runs := make([]*namesRun, len(peers))
	for i, p := range peers {
		run := &namesRun{result: NamesResult{Peer: p.Name, Workers: workers}}
		set, err := newWorkerSet(p, e, 1)
		switch {
		case err != nil:
			run.result.Note, run.failed = "setup: "+err.Error(), true
		case !p.Concurrent:
			set.close()
			run.result.Note, run.failed = "skipped: its client cannot run concurrent workers", true
		default:
			run.set = set
			defer set.close()
		}
		runs[i] = run
	}
	ping := mon.localPing(context.Background(), 200*time.Millisecond)
	turn := dur / time.Duration(max(rounds, 1))
	inTurns(1, len(runs), func(i int) { runs[i].turn(mon, workers, turn, false) })
	inTurns(rounds, len(runs), func(i int) { runs[i].turn(mon, workers, turn, true) })
	out := make([]NamesResult, len(runs))
	for i, run := range runs {
		run.result.LocalPingus = ping
		out[i] = run.finish()
	}
	return out
}

// turn runs one turn of the row for d, adding it to the row if counted.
// A call that fails ends the row's turns.
func (run *namesRun) turn(mon *monitor, workers int, d time.Duration, counted bool) {
	if run.failed {
		return
	}
	t := namesTurn(run.set, mon, workers, d)
	if t.err != nil {
		run.result.Note, run.failed = t.err.Error(), true
	}
	if !counted {
		return
	}
	run.cycles += t.cycles
	run.el += t.el
	run.clientCPU += t.clientCPU
	run.redisCPU += t.sd.CPUus
	run.rt += t.cs.RoundTrips
	run.tally.add(t.sd)
	run.result.TurnRates = append(run.result.TurnRates, float64(t.cycles)/(float64(t.el)/1e9))
}

// namesTurn runs workers goroutines on the set's one worker for d, each
// cycling its own name, between two snapshots of Redis and of this
// process's CPU time. The process's CPU is read inside Redis's snapshots,
// so that it leaves out the monitor's INFO and its parsing.
func namesTurn(set *workerSet, mon *monitor, workers int, d time.Duration) namesTurnOut {
	ctx := context.Background()
	w := set.ws[0]
	s0, _ := mon.snap(ctx)
	c0 := set.c.snap()
	cpu0 := processCPU()
	t0 := mono()
	end := t0 + int64(d)
	counts := make([]int64, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := "names-" + strconv.Itoa(i)
			var n int64 // counted here: goroutines that share a cache line slow each other
			for mono() < end {
				if errs[i] = lockCycle(w, name, false); errs[i] != nil {
					break
				}
				n++
			}
			counts[i] = n
		}()
	}
	wg.Wait()
	t := namesTurnOut{el: mono() - t0}
	t.clientCPU = processCPU() - cpu0
	t.cs = set.c.snap().sub(c0)
	s1, _ := mon.snap(ctx)
	t.sd = diffServer(s0, s1)
	for i, n := range counts {
		t.cycles += n
		if t.err == nil {
			t.err = errs[i]
		}
	}
	return t
}

// finish turns the row's sums into its figures per cycle.
func (run *namesRun) finish() NamesResult {
	r := run.result
	r.Cycles = run.cycles
	if run.cycles == 0 {
		return r
	}
	n := float64(run.cycles)
	r.CyclesPerSec = n / (float64(run.el) / 1e9)
	r.RedisCPUus = float64(run.redisCPU) / n
	r.ClientCPUus = float64(run.clientCPU) / 1e3 / n
	r.RedisCmds = float64(run.tally.cmds) / n
	r.RoundTripsPerCycle = float64(run.rt) / n
	r.Cmdstats, r.UsecPer = run.tally.perCycle(n)
	r.Conns = run.set.c.snap().Dials
	return r
}

// processCPU is this process's CPU time so far, user and system, in ns:
// the client's cost of a cycle, go-redis's and the runtime's included,
// as BenchmarkSideBySideManyNames reads it.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// namesInRepoWorkers is sideBySideWorkers of
// ../fairlock/sidebyside_names_test.go: BenchmarkSideBySideManyNames
// always runs this many, so its ratio compares with the bench's only at
// -names-workers 16.
const namesInRepoWorkers = 16

func namesFlags(fs *flag.FlagSet, c *config) {
	n := &c.names
	fs.IntVar(&n.workers, "names-workers", namesInRepoWorkers, "names: workers, each cycling a name of its own, all on one client per peer (go-redis's default pool; fairlock: one Locker)")
	fs.DurationVar(&n.dur, "names-dur", 6*time.Second, "names: duration per peer, in -names-rounds turns")
	fs.IntVar(&n.rounds, "names-rounds", 20, "names: turns per peer, the peers taking turns (6 s / 20: 300 ms, BenchmarkSideBySideManyNames's slice)")
	fs.BoolVar(&n.rueidis, "names-rueidis", true, "names: run rueidislock and the naive lock on rueidis beside the other peers")
	fs.StringVar(&n.sideBySideTime, "names-sidebyside-benchtime", "12s", "names: -test.benchtime of BenchmarkSideBySideManyNames, run from the -sidebyside binary right after the names row (each peer gets about half, in 300 ms slices)")
}

// names runs the many-names row on the Redis peers (etcd's worker has one
// session, which cannot run concurrent Locks), then
// BenchmarkSideBySideManyNames from the -sidebyside test binary, which
// starts a redis-server of its own.
func (b *bench) names() {
	nc := b.cfg.names
	var peers []peer
	for _, p := range b.peers {
		if p.Redis {
			peers = append(peers, p)
		}
	}
	if nc.rueidis {
		peers = append(peers, rueidisPeers()...)
	}
	b.res.Names = runNames(peers, b.env, b.mon, nc.workers, nc.dur, nc.rounds)
	for _, r := range b.res.Names {
		b.logf("names %-9s %7.0f cycles/s, Redis CPU %5.1f µs/cycle, client CPU %5.1f µs/cycle, %.2f Redis cmds/cycle, %.2f RT/cycle, conns %d %s",
			r.Peer, r.CyclesPerSec, r.RedisCPUus, r.ClientCPUus, r.RedisCmds, r.RoundTripsPerCycle, r.Conns, r.Note)
	}
	b.clean()
	if b.cfg.unc.sideBySide == "" || !peerNamed(b.peers, "fairlock") {
		return
	}
	sb := runNamesSideBySide(b.cfg.unc.sideBySide, nc.sideBySideTime, nc.workers)
	b.res.NamesSideBySide = &sb
	b.logf("names side-by-side (go test): fairlock/naive %.3f, redis-ratio %.3f, client-ratio %.3f (fairlock %.0f, naive %.0f cycles/s) %s",
		sb.Ratio, sb.RedisRatio, sb.ClientRatio, sb.Fairlock.CyclesPerSec, sb.Naive.CyclesPerSec, sb.Note)
	for _, t := range namesAgreement(b.res) {
		verdict := "agree"
		if !t.Met {
			verdict = "do not agree"
		}
		if t.NA {
			verdict = "not compared"
		}
		b.logf("names: bench and go test %s: %s", verdict, t.Value)
	}
}
