package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// rec is one grant: acquire call, grant, release start, on the shared
// monotonic clock (see mono).
type rec struct {
	W  int   `json:"w"`
	T0 int64 `json:"t0"`
	TG int64 `json:"tg"`
	TR int64 `json:"tr"`
	TU int64 `json:"tu"` // unlock returned
	// The semaphore and read-write lock rows also record:
	N     int   `json:"n,omitempty"`     // permits held (a writer: all); 0 is 1
	Write bool  `json:"write,omitempty"` // a writer of a read-write lock
	Fence int64 `json:"fence,omitempty"` // the grant's place in Redis's grant order; 0: the peer has none
	TQ    int64 `json:"tq,omitempty"`    // when the client learnt it had to wait; 0: granted at once
}

// permits is what the grant holds, 1 for a mutex.
func (x rec) permits() int64 { return int64(max(x.N, 1)) }

type loopOut struct {
	Recs     []rec     `json:"recs"`
	Counts   countSnap `json:"counts"`
	Errors   int64     `json:"errors"`
	Overlaps int64     `json:"overlaps"`
	FirstErr string    `json:"first_err,omitempty"`
}

// workerSet is a group of workers of one peer, each on its own client.
type workerSet struct {
	ws []worker
	c  *counters
}

func newWorkerSet(p peer, e *env, n int) (*workerSet, error) {
	s := &workerSet{c: &counters{}}
	for i := 0; i < n; i++ {
		w, err := p.New(e, s.c)
		if err != nil {
			s.close()
			return nil, err
		}
		s.ws = append(s.ws, w)
	}
	// Warm up: one cycle each on a private name, so connections, scripts
	// and subscriptions exist before measuring.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i, w := range s.ws {
		u, err := w.Lock(ctx, "warmup-"+strconv.Itoa(i))
		if err != nil {
			s.close()
			return nil, fmt.Errorf("warm-up lock: %w", err)
		}
		if err := u(ctx); err != nil {
			s.close()
			return nil, fmt.Errorf("warm-up unlock: %w", err)
		}
	}
	return s, nil
}

func (s *workerSet) close() {
	for _, w := range s.ws {
		w.Close()
	}
}

// runLoops runs every worker of the set in a lock/hold/unlock loop on name
// from startAt until endAt (monotonic ns). idBase numbers the workers.
func (s *workerSet) runLoops(name string, idBase int, startAt, endAt int64, hold time.Duration) loopOut {
	return runCycles(s.c, s.mutexCycles(name), idBase, startAt, endAt, hold, 1)
}

// mutexCycles are the set's workers' Locks of name, as cycles.
func (s *workerSet) mutexCycles(name string) []cycle {
	cycles := make([]cycle, len(s.ws))
	for i, w := range s.ws {
		cycles[i] = func(ctx context.Context) (taken, error) {
			u, err := w.Lock(ctx, name)
			return taken{unlock: u}, err
		}
	}
	return cycles
}

// measureLoops runs cycles on the set's counters, 50 ms from now for dur,
// between two snapshots of the server, as every in-process contended row
// does; it notes the row's PING baseline and SLOWLOG in d.
func measureLoops(set *workerSet, mon *monitor, d *runDetail, cycles []cycle, hold, dur time.Duration, capacity int64) (out loopOut, sd serverDelta, startAt, endAt int64) {
	ctx := context.Background()
	d.LocalPingus = mon.localPing(ctx, 200*time.Millisecond)
	mon.slowlogReset(ctx)
	s0, _ := mon.snap(ctx)
	startAt = mono() + int64(50*time.Millisecond)
	endAt = startAt + int64(dur)
	stopPings := mon.samplePings(runPingEvery)
	out = runCycles(set.c, cycles, 0, startAt, endAt, hold, capacity)
	var pings int64
	d.RunPingus, pings = stopPings()
	s1, _ := mon.snap(ctx)
	d.Slowlog = mon.slowlog(ctx, 5)
	sd = diffServer(s0, s1)
	sd.dropPings(pings)
	return out, sd, startAt, endAt
}

// runPingEvery is the interval of the PINGs sampled during a contended run.
const runPingEvery = 10 * time.Millisecond

// taken is one grant as a cycle reports it: a mutex's leaves every field
// but unlock zero.
type taken struct {
	unlock unlockFunc
	n      int   // permits held; 0 is 1
	write  bool  // a writer of a read-write lock
	fence  int64 // see rec.Fence
	queued int64 // see rec.TQ
}

// A cycle takes one grant for one worker of runCycles.
type cycle func(ctx context.Context) (taken, error)

// runCycles runs one acquire/hold/release loop per cycle, from startAt
// until endAt (monotonic ns); idBase numbers the workers. The permits held
// at once, counted in process between grant and release, must stay within
// capacity (1 for a mutex): every grant that takes them above it is counted
// in loopOut.Overlaps.
func runCycles(c *counters, cycles []cycle, idBase int, startAt, endAt int64, hold time.Duration, capacity int64) loopOut {
	var (
		held     atomic.Int64
		overlaps atomic.Int64
		errs     atomic.Int64
		mu       sync.Mutex
		all      []rec
		firstErr string
		wg       sync.WaitGroup
	)
	fail := func(prefix string, err error) {
		if errs.Add(1) == 1 {
			mu.Lock()
			firstErr = prefix + err.Error()
			mu.Unlock()
		}
	}
	c0 := c.snap()
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Duration(endAt-mono())+60*time.Second))
	defer cancel()
	for i, take := range cycles {
		wg.Add(1)
		go func(id int, take cycle) {
			defer wg.Done()
			var mine []rec
			sleepUntil(startAt)
			for mono() < endAt {
				t0 := mono()
				g, err := take(ctx)
				tg := mono()
				if err != nil {
					fail("", err)
					if ctx.Err() != nil {
						break
					}
					continue
				}
				x := rec{W: id, T0: t0, TG: tg, N: g.n, Write: g.write, Fence: g.fence, TQ: g.queued}
				n := x.permits()
				if held.Add(n) > capacity {
					overlaps.Add(1)
				}
				if hold > 0 {
					time.Sleep(hold)
				}
				held.Add(-n)
				x.TR = mono()
				err = g.unlock(ctx)
				x.TU = mono()
				mine = append(mine, x)
				if err != nil {
					fail("unlock: ", err)
				}
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}(idBase+i, take)
	}
	wg.Wait()
	return loopOut{Recs: all, Counts: c.snap().sub(c0), Errors: errs.Load(), Overlaps: overlaps.Load(), FirstErr: firstErr}
}

// ContendedResult is one peer in scenario 2.
type ContendedResult struct {
	Peer    string  `json:"peer"`
	Variant string  `json:"variant"`
	Procs   int     `json:"procs"`
	Workers int     `json:"workers"`
	HoldMs  float64 `json:"hold_ms"`
	grantFigures
	Busy         float64 `json:"busy"`
	GapP50us     float64 `json:"gap_p50_us"`
	GapP99us     float64 `json:"gap_p99_us"`
	GapMaxus     float64 `json:"gap_max_us"`
	GapsOver5ms  int     `json:"gaps_over_5ms"`
	ReleaseP50us float64 `json:"release_p50_us"`
	grantCost
	Overlaps       int64   `json:"overlaps"`
	OverlapsAtomic int64   `json:"overlaps_atomic"`
	Barging        int     `json:"barging"`
	BargingPct     float64 `json:"barging_pct"`
	Errors         int64   `json:"errors"`
	// WaitHist is the distribution of the waits in the window, which the
	// contention plot draws.
	WaitHist *WaitHist `json:"wait_hist,omitempty"`
	runDetail
}

// grantFigures are what every contended row measures of the grants in its
// window, or of one class of them (a read-write lock's readers).
type grantFigures struct {
	DurationS    float64 `json:"duration_s"`
	Grants       int     `json:"grants"`
	GrantsTotal  int     `json:"grants_total"`
	GrantsPerSec float64 `json:"grants_per_s"`
	Jain         float64 `json:"jain"`
	MinGrants    int64   `json:"min_grants"`
	MaxGrants    int64   `json:"max_grants"`
	WaitP50us    float64 `json:"wait_p50_us"`
	WaitP99us    float64 `json:"wait_p99_us"`
	WaitMaxus    float64 `json:"wait_max_us"`
	HoldMeanus   float64 `json:"hold_mean_us"`
}

// figures measures the grants of recs (sorted by grant time) that keep
// selects, nil for all; workers number 0..workers-1. It also returns the
// permits held × time of those in the window, in ns.
func figures(recs []rec, workers int, startAt, endAt int64, keep func(rec) bool) (grantFigures, int64) {
	var g grantFigures
	perW := make([]int64, workers)
	var waits []int64
	var hold, permitTime int64
	for _, x := range recs {
		if keep != nil && !keep(x) {
			continue
		}
		g.GrantsTotal++
		if x.TG < startAt || x.TG > endAt {
			continue
		}
		g.Grants++
		if x.W < workers {
			perW[x.W]++
		}
		waits = append(waits, x.TG-x.T0)
		hold += x.TR - x.TG
		permitTime += x.permits() * (x.TR - x.TG)
	}
	g.DurationS = float64(endAt-startAt) / 1e9
	g.GrantsPerSec = float64(g.Grants) / g.DurationS
	g.Jain = jain(perW)
	if len(perW) > 0 {
		g.MinGrants, g.MaxGrants = perW[0], perW[0]
		for _, n := range perW {
			g.MinGrants = min(g.MinGrants, n)
			g.MaxGrants = max(g.MaxGrants, n)
		}
	}
	g.WaitP50us = us(percentile(waits, 50))
	g.WaitP99us = us(percentile(waits, 99))
	g.WaitMaxus = us(maxOf(waits))
	if g.Grants > 0 {
		g.HoldMeanus = us(hold) / float64(g.Grants)
	}
	return g, permitTime
}

// overCapacity counts the grants in the window that took the permits held
// at once, by the records' grant-to-release intervals, above capacity: for
// a mutex (capacity 1) the grants that overlapped another holder. It is
// valid across processes, on the shared clock. Client-side intervals lie
// within the server-side ones, so a correct lock never shows one.
func overCapacity(recs []rec, capacity, startAt, endAt int64) int64 {
	type edge struct {
		t     int64
		delta int64
		count bool
	}
	edges := make([]edge, 0, 2*len(recs))
	for _, x := range recs {
		edges = append(edges, edge{x.TG, x.permits(), x.TG >= startAt && x.TG <= endAt}, edge{x.TR, -x.permits(), false})
	}
	// at one instant a release comes before a grant
	sort.Slice(edges, func(i, j int) bool {
		return edges[i].t < edges[j].t || edges[i].t == edges[j].t && edges[i].delta < edges[j].delta
	})
	var held, n int64
	for _, e := range edges {
		held += e.delta
		if e.delta > 0 && held > capacity && e.count {
			n++
		}
	}
	return n
}

// grantCost is what a row's grants cost, per grant: client round trips and
// commands, Redis commands and CPU.
type grantCost struct {
	RoundTripsPerGrant  float64 `json:"round_trips_per_grant"`
	ClientCmdsPerGrant  float64 `json:"client_cmds_per_grant"`
	ServerCmdsPerGrant  float64 `json:"server_cmds_per_grant"`
	ServerCPUusPerGrant float64 `json:"server_cpu_us_per_grant"`
}

// runDetail is what every scenario row records about its run besides its
// own figures: client calls, Redis's view of them, and the PING baseline.
type runDetail struct {
	ClientCalls map[string]int64 `json:"client_calls,omitempty"`
	EvalUsec    float64          `json:"evalsha_server_us_per_call,omitempty"`
	Slowlog     []SlowEntry      `json:"slowlog,omitempty"`
	Cmdstats    map[string]int64 `json:"cmdstats,omitempty"`
	LocalPingus float64          `json:"local_ping_p50_us"`
	// RunPingus is the PING round trip p50 sampled every 10 ms during the
	// run (its PINGs are left out of the commands counted): the round trip
	// with the run's own load and scheduling delays in it.
	RunPingus float64 `json:"run_ping_p50_us,omitempty"`
	Note      string  `json:"note,omitempty"`
}

// analyse fills the grant-sequence metrics from the merged records.
func analyse(r *ContendedResult, recs []rec, workers int, startAt, endAt int64) {
	sort.Slice(recs, func(i, j int) bool { return recs[i].TG < recs[j].TG })
	var busy int64
	r.grantFigures, busy = figures(recs, workers, startAt, endAt, nil)
	r.Busy = float64(busy) / float64(endAt-startAt)
	r.Overlaps = overCapacity(recs, 1, startAt, endAt)
	r.WaitHist = newWaitHist(windowWaits(recs, startAt, endAt, nil))
	byW := make([][]rec, workers)
	for _, x := range recs {
		if x.W < workers {
			byW[x.W] = append(byW[x.W], x) // sorted by TG since recs is
		}
	}
	var gaps, rels []int64
	for i, x := range recs {
		if x.TG < startAt || x.TG > endAt {
			continue
		}
		rels = append(rels, x.TU-x.TR)
		if i > 0 {
			p := recs[i-1]
			if x.TG >= p.TR {
				gaps = append(gaps, x.TG-p.TR)
			}
			if p.W == x.W && outstanding(byW, x.W, p.TR) != nil {
				r.Barging++
			}
		}
	}
	r.GapP50us = us(percentile(gaps, 50))
	r.GapP99us = us(percentile(gaps, 99))
	r.ReleaseP50us = us(percentile(rels, 50))
	r.GapMaxus = us(maxOf(gaps))
	for _, g := range gaps {
		if g > int64(5*time.Millisecond) {
			r.GapsOver5ms++
		}
	}
	if r.Grants > 0 {
		r.BargingPct = 100 * float64(r.Barging) / float64(r.Grants)
	}
}

// outstanding returns the request of a worker other than w that had its
// acquire call outstanding at time t (called, not yet granted), the first
// such worker's, or nil. byW holds each worker's records in grant order.
func outstanding(byW [][]rec, w int, t int64) *rec {
	for o := range byW {
		if o == w {
			continue
		}
		if x := pending(byW[o], t); x != nil {
			return x
		}
	}
	return nil
}

// pending returns the record of rs (one worker's, in grant order) whose
// acquire call was outstanding at t, or nil.
func pending(rs []rec, t int64) *rec {
	i := sort.Search(len(rs), func(i int) bool { return rs[i].TG >= t })
	if i < len(rs) && rs[i].T0 <= t {
		return &rs[i]
	}
	return nil
}

// perGrant divides a run's counts by its grants.
func perGrant(g *grantCost, d *runDetail, grants int, cs countSnap, sd serverDelta, redis bool) {
	n := float64(grants)
	if n == 0 {
		return
	}
	g.RoundTripsPerGrant = float64(cs.RoundTrips) / n
	g.ClientCmdsPerGrant = float64(cs.Commands) / n
	d.ClientCalls = cs.Names
	if redis {
		g.ServerCmdsPerGrant = float64(sd.Commands) / n
		g.ServerCPUusPerGrant = float64(sd.CPUus) / n
		d.Cmdstats = sd.Cmdstats
		d.EvalUsec = sd.UsecPer["evalsha"]
	} else {
		g.ServerCPUusPerGrant = float64(sd.EtcdCPUus) / n
	}
}

// runContended: workers goroutines in this process, each with its own client.
func runContended(p peer, e *env, mon *monitor, workers int, hold, dur time.Duration, name string) ContendedResult {
	r := ContendedResult{Peer: p.Name, Variant: fmt.Sprintf("%dx1", workers), Procs: 1, Workers: workers, HoldMs: hold.Seconds() * 1e3}
	set, err := newWorkerSet(p, e, workers)
	if err != nil {
		r.Note = "setup: " + err.Error()
		return r
	}
	defer set.close()
	out, sd, startAt, endAt := measureLoops(set, mon, &r.runDetail, set.mutexCycles(name), hold, dur, 1)
	dumpRecs(p.Name, out.Recs, startAt)
	analyse(&r, out.Recs, workers, startAt, endAt)
	r.OverlapsAtomic += out.Overlaps
	r.Errors = out.Errors
	if out.FirstErr != "" {
		r.Note = "first error: " + out.FirstErr
	}
	perGrant(&r.grantCost, &r.runDetail, r.GrantsTotal, out.Counts, sd, p.Redis)
	return r
}

// runContendedMP: procs child processes of this binary, each running
// perProc workers. Children report raw CLOCK_MONOTONIC readings, which are
// comparable across processes (see mono).
func runContendedMP(p peer, e *env, mon *monitor, procs, perProc int, hold, dur time.Duration, name string) ContendedResult {
	workers := procs * perProc
	r := ContendedResult{Peer: p.Name, Variant: fmt.Sprintf("%dx%d", procs, perProc), Procs: procs, Workers: workers, HoldMs: hold.Seconds() * 1e3}
	exe, err := os.Executable()
	if err != nil {
		r.Note = err.Error()
		return r
	}
	type child struct {
		cmd *exec.Cmd
		in  io.WriteCloser
		out *bufio.Reader
	}
	var kids []child
	defer func() {
		for _, k := range kids {
			k.in.Close()
			k.cmd.Wait()
		}
	}()
	for i := 0; i < procs; i++ {
		cmd := exec.Command(exe, "-child",
			"-peers", p.Name, "-redis", e.RedisAddr, "-etcd", e.EtcdEndpoint,
			"-lease", e.LeaseTTL.String(), "-spin", e.SpinDelay.String(),
			"-child-workers", strconv.Itoa(perProc), "-child-idbase", strconv.Itoa(i*perProc),
			"-child-name", name, "-contended-hold", hold.String())
		cmd.Stderr = os.Stderr
		in, _ := cmd.StdinPipe()
		outp, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			r.Note = err.Error()
			return r
		}
		kids = append(kids, child{cmd, in, bufio.NewReaderSize(outp, 1<<20)})
	}
	for _, k := range kids {
		line, err := k.out.ReadString('\n')
		if err != nil || line != "ready\n" {
			r.Note = fmt.Sprintf("child not ready: %q %v", line, err)
			return r
		}
	}
	ctx := context.Background()
	r.LocalPingus = mon.localPing(ctx, 200*time.Millisecond)
	mon.slowlogReset(ctx)
	s0, _ := mon.snap(ctx)
	startAt := mono() + int64(100*time.Millisecond)
	endAt := startAt + int64(dur)
	for _, k := range kids {
		fmt.Fprintf(k.in, "%d %d\n", startAt, endAt)
	}
	stopPings := mon.samplePings(runPingEvery)
	var recs []rec
	var cs countSnap
	for _, k := range kids {
		var o loopOut
		if err := json.NewDecoder(k.out).Decode(&o); err != nil {
			r.Note = "child output: " + err.Error()
			return r
		}
		recs = append(recs, o.Recs...)
		cs.RoundTrips += o.Counts.RoundTrips
		cs.Commands += o.Counts.Commands
		cs.Dials += o.Counts.Dials
		if cs.Names == nil {
			cs.Names = map[string]int64{}
		}
		for k, v := range o.Counts.Names {
			cs.Names[k] += v
		}
		r.Errors += o.Errors
		r.OverlapsAtomic += o.Overlaps
		if o.FirstErr != "" && r.Note == "" {
			r.Note = "first error: " + o.FirstErr
		}
	}
	var pings int64
	r.RunPingus, pings = stopPings()
	s1, _ := mon.snap(ctx)
	r.Slowlog = mon.slowlog(ctx, 5)
	analyse(&r, recs, workers, startAt, endAt)
	sd := diffServer(s0, s1)
	sd.dropPings(pings)
	perGrant(&r.grantCost, &r.runDetail, r.GrantsTotal, cs, sd, p.Redis)
	return r
}

// childMain is the body of a "-child" process of runContendedMP.
func childMain(p peer, e *env, workers, idBase int, name string, hold time.Duration) error {
	set, err := newWorkerSet(p, e, workers)
	if err != nil {
		return err
	}
	defer set.close()
	fmt.Println("ready")
	var startAt, endAt int64
	if _, err := fmt.Fscan(os.Stdin, &startAt, &endAt); err != nil {
		return err
	}
	out := set.runLoops(name, idBase, startAt, endAt, hold)
	return json.NewEncoder(os.Stdout).Encode(out)
}

// dumpRecs writes the raw grant records when BENCH_DUMP_RECS names a
// directory (for digging into stalls; not used by run.sh).
func dumpRecs(peer string, recs []rec, origin int64) {
	dir := os.Getenv("BENCH_DUMP_RECS")
	if dir == "" {
		return
	}
	f, err := os.Create(dir + "/" + peer + ".tsv")
	if err != nil {
		return
	}
	defer f.Close()
	sorted := append([]rec(nil), recs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].TG < sorted[j].TG })
	fmt.Fprintln(f, "w\tt0_us\ttg_us\ttr_us\ttu_us")
	for _, x := range sorted {
		fmt.Fprintf(f, "%d\t%d\t%d\t%d\t%d\n", x.W, (x.T0-origin)/1e3, (x.TG-origin)/1e3, (x.TR-origin)/1e3, (x.TU-origin)/1e3)
	}
}
