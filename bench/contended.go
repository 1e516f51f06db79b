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
}

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
	var (
		holders  atomic.Int64
		overlaps atomic.Int64
		errs     atomic.Int64
		mu       sync.Mutex
		all      []rec
		firstErr string
		wg       sync.WaitGroup
	)
	c0 := s.c.snap()
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Duration(endAt-mono())+60*time.Second))
	defer cancel()
	for i, w := range s.ws {
		wg.Add(1)
		go func(id int, w worker) {
			defer wg.Done()
			var mine []rec
			sleepUntil(startAt)
			for mono() < endAt {
				t0 := mono()
				unlock, err := w.Lock(ctx, name)
				tg := mono()
				if err != nil {
					if errs.Add(1) == 1 {
						mu.Lock()
						firstErr = err.Error()
						mu.Unlock()
					}
					if ctx.Err() != nil {
						break
					}
					continue
				}
				if holders.Add(1) != 1 {
					overlaps.Add(1)
				}
				if hold > 0 {
					time.Sleep(hold)
				}
				holders.Add(-1)
				tr := mono()
				err = unlock(ctx)
				mine = append(mine, rec{W: id, T0: t0, TG: tg, TR: tr, TU: mono()})
				if err != nil {
					if errs.Add(1) == 1 {
						mu.Lock()
						firstErr = "unlock: " + err.Error()
						mu.Unlock()
					}
				}
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}(idBase+i, w)
	}
	wg.Wait()
	return loopOut{Recs: all, Counts: s.c.snap().sub(c0), Errors: errs.Load(), Overlaps: overlaps.Load(), FirstErr: firstErr}
}

// ContendedResult is one peer in scenario 2.
type ContendedResult struct {
	Peer                string  `json:"peer"`
	Variant             string  `json:"variant"`
	Procs               int     `json:"procs"`
	Workers             int     `json:"workers"`
	HoldMs              float64 `json:"hold_ms"`
	DurationS           float64 `json:"duration_s"`
	Grants              int     `json:"grants"`
	GrantsTotal         int     `json:"grants_total"`
	GrantsPerSec        float64 `json:"grants_per_s"`
	Busy                float64 `json:"busy"`
	Jain                float64 `json:"jain"`
	MinGrants           int64   `json:"min_grants"`
	MaxGrants           int64   `json:"max_grants"`
	WaitP50us           float64 `json:"wait_p50_us"`
	WaitP99us           float64 `json:"wait_p99_us"`
	WaitMaxus           float64 `json:"wait_max_us"`
	GapP50us            float64 `json:"gap_p50_us"`
	GapP99us            float64 `json:"gap_p99_us"`
	GapMaxus            float64 `json:"gap_max_us"`
	GapsOver5ms         int     `json:"gaps_over_5ms"`
	ReleaseP50us        float64 `json:"release_p50_us"`
	HoldMeanus          float64 `json:"hold_mean_us"`
	RoundTripsPerGrant  float64 `json:"round_trips_per_grant"`
	ClientCmdsPerGrant  float64 `json:"client_cmds_per_grant"`
	ServerCmdsPerGrant  float64 `json:"server_cmds_per_grant"`
	ServerCPUusPerGrant float64 `json:"server_cpu_us_per_grant"`
	Overlaps            int64   `json:"overlaps"`
	OverlapsAtomic      int64   `json:"overlaps_atomic"`
	Barging             int     `json:"barging"`
	BargingPct          float64 `json:"barging_pct"`
	Errors              int64   `json:"errors"`
	runDetail
}

// runDetail is what every scenario row records about its run besides its
// own figures: client calls, Redis's view of them, and the PING baseline.
type runDetail struct {
	ClientCalls map[string]int64 `json:"client_calls,omitempty"`
	EvalUsec    float64          `json:"evalsha_server_us_per_call,omitempty"`
	Slowlog     []SlowEntry      `json:"slowlog,omitempty"`
	Cmdstats    map[string]int64 `json:"cmdstats,omitempty"`
	LocalPingus float64          `json:"local_ping_p50_us"`
	Note        string           `json:"note,omitempty"`
}

// analyse fills the grant-sequence metrics from the merged records.
func analyse(r *ContendedResult, recs []rec, workers int, startAt, endAt int64) {
	sort.Slice(recs, func(i, j int) bool { return recs[i].TG < recs[j].TG })
	r.GrantsTotal = len(recs)
	perW := make([]int64, workers)
	byW := make([][]rec, workers)
	for _, x := range recs {
		if x.W < workers {
			byW[x.W] = append(byW[x.W], x) // sorted by TG since recs is
		}
	}
	// waitingAt reports whether a worker other than w had an Acquire call
	// outstanding at time t.
	waitingAt := func(w int, t int64) bool {
		for o := 0; o < workers; o++ {
			if o == w {
				continue
			}
			rs := byW[o]
			i := sort.Search(len(rs), func(i int) bool { return rs[i].TG >= t })
			if i < len(rs) && rs[i].T0 <= t {
				return true
			}
		}
		return false
	}
	var waits, gaps, rels []int64
	var busy int64
	for i, x := range recs {
		if x.TG < startAt || x.TG > endAt {
			continue
		}
		r.Grants++
		perW[x.W]++
		waits = append(waits, x.TG-x.T0)
		rels = append(rels, x.TU-x.TR)
		busy += x.TR - x.TG
		if i > 0 {
			p := recs[i-1]
			if x.TG < p.TR {
				r.Overlaps++ // interval check, valid across processes
			} else {
				gaps = append(gaps, x.TG-p.TR)
			}
			if p.W == x.W && waitingAt(x.W, p.TR) {
				r.Barging++
			}
		}
	}
	d := float64(endAt-startAt) / 1e9
	r.DurationS = d
	r.GrantsPerSec = float64(r.Grants) / d
	r.Busy = float64(busy) / float64(endAt-startAt)
	r.Jain = jain(perW)
	if len(perW) > 0 {
		r.MinGrants, r.MaxGrants = perW[0], perW[0]
		for _, g := range perW {
			r.MinGrants = min(r.MinGrants, g)
			r.MaxGrants = max(r.MaxGrants, g)
		}
	}
	r.WaitP50us = us(percentile(waits, 50))
	r.WaitP99us = us(percentile(waits, 99))
	r.WaitMaxus = us(maxOf(waits))
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
		r.HoldMeanus = us(busy) / float64(r.Grants)
		r.BargingPct = 100 * float64(r.Barging) / float64(r.Grants)
	}
}

func perGrant(r *ContendedResult, cs countSnap, sd serverDelta, redis bool) {
	n := float64(r.GrantsTotal)
	if n == 0 {
		return
	}
	if redis {
		r.RoundTripsPerGrant = float64(cs.RoundTrips) / n
		r.ClientCmdsPerGrant = float64(cs.Commands) / n
		r.ServerCmdsPerGrant = float64(sd.Commands) / n
		r.ServerCPUusPerGrant = float64(sd.CPUus) / n
		r.Cmdstats = sd.Cmdstats
		r.ClientCalls = cs.Names
		r.EvalUsec = sd.UsecPer["evalsha"]
	} else {
		r.RoundTripsPerGrant = float64(cs.RoundTrips) / n
		r.ClientCmdsPerGrant = float64(cs.Commands) / n
		r.ServerCPUusPerGrant = float64(sd.EtcdCPUus) / n
		r.ClientCalls = cs.Names
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
	ctx := context.Background()
	r.LocalPingus = mon.localPing(ctx, 200*time.Millisecond)
	mon.slowlogReset(ctx)
	s0, _ := mon.snap(ctx)
	startAt := mono() + int64(50*time.Millisecond)
	endAt := startAt + int64(dur)
	out := set.runLoops(name, 0, startAt, endAt, hold)
	s1, _ := mon.snap(ctx)
	dumpRecs(p.Name, out.Recs, startAt)
	r.Slowlog = mon.slowlog(ctx, 5)
	analyse(&r, out.Recs, workers, startAt, endAt)
	r.OverlapsAtomic += out.Overlaps
	r.Errors = out.Errors
	if out.FirstErr != "" {
		r.Note = "first error: " + out.FirstErr
	}
	perGrant(&r, out.Counts, diffServer(s0, s1), p.Redis)
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
	s1, _ := mon.snap(ctx)
	r.Slowlog = mon.slowlog(ctx, 5)
	analyse(&r, recs, workers, startAt, endAt)
	perGrant(&r, cs, diffServer(s0, s1), p.Redis)
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
