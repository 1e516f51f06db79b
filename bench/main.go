// Command bench runs fairlock and the locks users would pick instead (bsm/redislock,
// redsync, etcd's concurrency.Mutex, a naive SET NX PX spin) through the same
// scenarios against one redis-server (and one etcd), and fairlock's Semaphore
// and RWMutex against a naive spinning semaphore and read-write lock, and
// writes results.json, results.md and chart.svg. run.sh starts the servers.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

type Meta struct {
	Date         string   `json:"date"`
	Nproc        int      `json:"nproc"`
	CPU          string   `json:"cpu"`
	GoVersion    string   `json:"go_version"`
	RedisVersion string   `json:"redis_version"`
	EtcdVersion  string   `json:"etcd_version"`
	LoadAvg      string   `json:"loadavg_at_start"`
	Args         []string `json:"args"`
	LeaseTTL     string   `json:"lease_ttl"`
	Spin         string   `json:"spin"`
	Settings     []string `json:"peer_settings"`
	ElapsedS     float64  `json:"elapsed_s"`
}

type Results struct {
	Meta        Meta                `json:"meta"`
	Limit       *LimitResult        `json:"limit,omitempty"`
	Uncontended []UncontendedResult `json:"uncontended,omitempty"`
	Contended   []ContendedResult   `json:"contended,omitempty"`
	FIFO        []FIFOResult        `json:"fifo,omitempty"`
	Scale       []ScaleResult       `json:"scale,omitempty"`
	Semaphore   []KindResult        `json:"semaphore,omitempty"`
	RWMutex     []KindResult        `json:"rwmutex,omitempty"`
	// SideBySide is BenchmarkSideBySide's figures, run after the
	// uncontended row.
	SideBySide *SideBySideResult `json:"side_by_side,omitempty"`
	// Idle is the scale row's idle part: leases and waiters kept while
	// nothing is acquired or released.
	Idle []IdleResult `json:"idle,omitempty"`
	// SemaphoreDrain is the scale scenario's one-name drain on a semaphore.
	SemaphoreDrain []ScaleResult `json:"semaphore_drain,omitempty"`
	// Weighted is the semaphore with one big request among small ones.
	Weighted []KindResult `json:"weighted,omitempty"`
	// Tenants is the semaphore shared by tenants of unequal demand.
	Tenants  []KindResult `json:"tenants,omitempty"`
	Baseline *Baseline    `json:"baseline,omitempty"`
	Targets  []Target     `json:"targets,omitempty"`
}

// Baseline is what an earlier run measured of the paths issue 9 says must
// not get slower: fairlock's FIFO hand-off and its largest one-name drain.
type Baseline struct {
	Date             string  `json:"date"`
	FIFOPerHandoffus float64 `json:"fifo_per_handoff_us,omitempty"`
	DrainWaiters     int     `json:"drain_waiters,omitempty"`
	DrainPerGrantus  float64 `json:"drain_per_grant_us,omitempty"`
}

// loadBaseline reads the fairlock figures of the run in a results.json.
func loadBaseline(path string) (*Baseline, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var old Results
	if err := json.Unmarshal(b, &old); err != nil {
		return nil, err
	}
	base := &Baseline{Date: old.Meta.Date}
	for _, f := range old.FIFO {
		if f.Peer == "fairlock" && f.Note == "" {
			base.FIFOPerHandoffus = f.PerHandoffus
		}
	}
	for _, s := range old.Scale {
		if s.Peer == "fairlock" && s.Names == 1 && s.Waiters > base.DrainWaiters {
			base.DrainWaiters, base.DrainPerGrantus = s.Waiters, s.PerGrantus
		}
	}
	return base, nil
}

func main() {
	var (
		redisAddr      = flag.String("redis", "127.0.0.1:6379", "redis-server address")
		etcdEP         = flag.String("etcd", "", "etcd client URL (empty: skip etcd)")
		etcdPID        = flag.Int("etcd-pid", 0, "etcd process id, for its CPU time from /proc")
		peersF         = flag.String("peers", "fairlock,redislock,redsync,naive,etcd", "peers to run")
		scenF          = flag.String("scenarios", "limit,uncontended,contended,contended-mp,fifo,scale,semaphore,semaphore-weighted,tenants,rwmutex,semaphore-drain", "scenarios to run")
		out            = flag.String("out", "results", "output directory")
		lease          = flag.Duration("lease", 10*time.Second, "lease TTL / expiry for every peer")
		spin           = flag.Duration("spin", time.Millisecond, "retry delay of the spinning peers")
		limitDur       = flag.Duration("limit-dur", 2*time.Second, "limit: duration of each measurement")
		uncDur         = flag.Duration("uncontended-dur", 6*time.Second, "uncontended: duration per peer")
		uncRounds      = flag.Int("uncontended-rounds", 20, "uncontended: turns per peer, the peers taking turns (6 s / 20: 300 ms, BenchmarkSideBySide's slice)")
		uncPool        = flag.Int("uncontended-pool", 1, "uncontended: go-redis PoolSize of each peer's client (0: go-redis's default), as BenchmarkSideBySide")
		uncBg          = flag.Bool("uncontended-background", false, "uncontended: call with context.Background() instead of a fresh context with a deadline per call")
		sideBySide     = flag.String("sidebyside", "", "uncontended: test binary of ../fairlock (go test -c) whose BenchmarkSideBySide runs right after the uncontended row (run.sh builds bin/fairlock.test); empty: skip")
		sideBySideTime = flag.String("sidebyside-benchtime", "12s", "uncontended: -test.benchtime of BenchmarkSideBySide (each peer gets half, in 300 ms slices)")
		uncBgFairlock  = flag.Bool("uncontended-fairlock-background", true, "uncontended: also run fairlock with context.Background()")
		cWorkers       = flag.Int("contended-workers", 16, "contended: workers (one client each)")
		cHold          = flag.Duration("contended-hold", time.Millisecond, "contended: hold time")
		cDur           = flag.Duration("contended-dur", 10*time.Second, "contended: duration per peer")
		mpProcs        = flag.Int("mp-procs", 4, "contended-mp: processes")
		mpWorkers      = flag.Int("mp-workers", 4, "contended-mp: workers per process")
		mpDur          = flag.Duration("mp-dur", 10*time.Second, "contended-mp: duration per peer")
		fWaiters       = flag.Int("fifo-waiters", 20, "fifo: waiters")
		fSpacing       = flag.Duration("fifo-spacing", 20*time.Millisecond, "fifo: arrival spacing")
		fHold          = flag.Duration("fifo-hold", 0, "fifo: hold time of each waiter")
		fRounds        = flag.Int("fifo-rounds", 5, "fifo: rounds per peer")
		scaleOne       = flag.String("scale-single", "10,100,1000,10000", "scale: waiter counts on one name")
		scaleNames     = flag.Int("scale-names", 1000, "scale: names of the many-names case (0 = skip)")
		scalePer       = flag.Int("scale-per-name", 10, "scale: waiters per name in the many-names case")
		scalePeers     = flag.String("scale-peers", "fairlock,naive", "scale: peers")
		scalePeerMax   = flag.Int("scale-peer-max", 100, "scale, semaphore-drain: largest waiter count run for peers other than fairlock")
		scaleIdle      = flag.String("scale-idle", "1,100,1000,10000", "scale: counts of held leases (one Locker, as many names) and of waiters (one Locker, one name) kept idle (empty: skip)")
		scaleIdleDur   = flag.Duration("scale-idle-dur", 4*time.Second, "scale: idle window of each idle case (fairlock's default heartbeat is 1 s)")
		scaleIdleWait  = flag.Duration("scale-idle-settle", 1500*time.Millisecond, "scale: wait after an idle case's setup, before its window, so that the window holds no setup work")
		semCap         = flag.Int("sem-capacity", 4, "semaphore, semaphore-drain: capacity (every request takes 1 permit)")
		semWorkers     = flag.Int("sem-workers", 16, "semaphore: workers (one client each)")
		semHold        = flag.Duration("sem-hold", time.Millisecond, "semaphore: hold time")
		semDur         = flag.Duration("sem-dur", 10*time.Second, "semaphore: duration per peer")
		semDrain       = flag.String("sem-drain", "10,10000", "semaphore-drain: waiter counts on one semaphore")
		semDrainPeers  = flag.String("sem-drain-peers", "fairlock", "semaphore-drain: peers (a spinner, which cannot say when all its waiters wait, sleeps 200 ms a round)")
		semDrainGrants = flag.Int("sem-drain-grants", 1000, "semaphore-drain: a case of fewer waiters runs in rounds until it has made this many grants")
		wWorkers       = flag.Int("weighted-workers", 16, "semaphore-weighted: workers (one client each): one big, the rest 1 permit")
		wBig           = flag.Int("weighted-big", 4, "semaphore-weighted: permits of the big worker's requests (capacity: -sem-capacity)")
		wDur           = flag.Duration("weighted-dur", 10*time.Second, "semaphore-weighted: duration per peer (hold: -sem-hold)")
		tLayout        = flag.String("tenants", "13,1,1,1", "tenants: workers of each tenant (A, B, ...), one client each (capacity: -sem-capacity)")
		tDur           = flag.Duration("tenants-dur", 10*time.Second, "tenants: duration per row (hold: -sem-hold)")
		rwWorkers      = flag.Int("rw-workers", 16, "rwmutex: workers (one client each)")
		rwReadPct      = flag.Int("rw-read-pct", 90, "rwmutex: share of cycles that read, in %, drawn per cycle")
		rwSeed         = flag.Uint64("rw-seed", 1, "rwmutex: seed of each worker's draws (with its number)")
		rwHold         = flag.Duration("rw-hold", time.Millisecond, "rwmutex: hold time, readers and writers")
		rwDur          = flag.Duration("rw-dur", 10*time.Second, "rwmutex: duration per peer")
		cpuprofile     = flag.String("cpuprofile", "", "write a CPU profile of the whole run")
		warmup         = flag.Duration("warmup", 3*time.Second, "load Redis and the CPUs this long before measuring (the first seconds after idle run slow here)")
		reportOnly     = flag.Bool("report-only", false, "re-render results.md and chart.svg from results.json")
		baseline       = flag.String("baseline", "", "results.json of an earlier run: fairlock's FIFO hand-off and largest drain must be no slower than there (within 50%)")
		freeport       = flag.Bool("freeport", false, "print a free loopback TCP port and exit")
		builtF         = flag.Bool("fairlock-built", false, "print yes if fairlock is built into this binary, else no, and exit")

		child       = flag.Bool("child", false, "internal: worker process of contended-mp")
		childW      = flag.Int("child-workers", 4, "internal")
		childIDBase = flag.Int("child-idbase", 0, "internal")
		childName   = flag.String("child-name", "", "internal")
	)
	flag.Parse()
	if *builtF {
		if fairlockBuilt {
			fmt.Println("yes")
		} else {
			fmt.Println("no")
		}
		return
	}
	if *freeport {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
		return
	}
	e := &env{RedisAddr: *redisAddr, EtcdEndpoint: *etcdEP, SpinDelay: *spin, LeaseTTL: *lease}
	if *child {
		p, _ := peerByName(*peersF)
		if err := childMain(p, e, *childW, *childIDBase, *childName, *cHold); err != nil {
			log.Fatalf("child: %v", err)
		}
		return
	}
	if *reportOnly {
		b, err := os.ReadFile(filepath.Join(*out, "results.json"))
		if err != nil {
			log.Fatal(err)
		}
		var res Results
		if err := json.Unmarshal(b, &res); err != nil {
			log.Fatal(err)
		}
		if *baseline != "" {
			if res.Baseline, err = loadBaseline(*baseline); err != nil {
				log.Fatalf("baseline: %v", err)
			}
		}
		res.Targets = evalTargets(&res)
		writeAll(*out, &res)
		return
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}

	var peers []peer
	for _, n := range strings.Split(*peersF, ",") {
		p, ok := peerByName(strings.TrimSpace(n))
		if !ok {
			log.Fatalf("unknown peer %q", n)
		}
		peers = append(peers, p)
	}
	scen := nameSet(*scenF)
	mon := newMonitor(e.RedisAddr, *etcdPID)
	ctx := context.Background()
	if err := mon.cl.Ping(ctx).Err(); err != nil {
		log.Fatalf("redis at %s: %v", e.RedisAddr, err)
	}
	res := &Results{Meta: meta(mon, e, peers)}
	if *baseline != "" {
		var err error
		if res.Baseline, err = loadBaseline(*baseline); err != nil {
			log.Fatalf("baseline: %v", err)
		}
	}
	start := time.Now()
	logf := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
	}
	logContended := func(r ContendedResult) {
		logf("contended %s %-9s %6.0f grants/s jain %.4f gap p50 %5.0f µs (release call %4.0f µs) wait p99 %6.1f ms RT/grant %.2f barging %.0f%% overlaps %d/%d %s",
			r.Variant, r.Peer, r.GrantsPerSec, r.Jain, r.GapP50us, r.ReleaseP50us, r.WaitP99us/1e3, r.RoundTripsPerGrant, r.BargingPct, r.Overlaps, r.OverlapsAtomic, r.Note)
	}

	flush := func() {
		res.Meta.ElapsedS = time.Since(start).Seconds()
		res.Targets = evalTargets(res)
		writeAll(*out, res)
	}
	clean := func() { mon.cl.FlushAll(ctx) }

	if *warmup > 0 {
		warm(e, *warmup)
		logf("warm-up done")
	}
	if scen["limit"] {
		l, err := runLimit(e, *limitDur)
		if err != nil {
			log.Fatalf("limit: %v", err)
		}
		res.Limit = &l
		logf("limit: PING p50 %.0f µs, EVALSHA %.0f/s", l.PingP50us, l.EvalshaOpsPerSec)
		clean()
	}
	if scen["uncontended"] {
		var rows []uncontendedRow
		for _, p := range peers {
			rows = append(rows, uncontendedRow{p: p, name: p.Name, background: *uncBg})
			if p.Name == "fairlock" && !*uncBg && *uncBgFairlock {
				// Callers pass both kinds of context; a context that can
				// end once cost fairlock a goroutine per call.
				rows = append(rows, uncontendedRow{p: p, name: "fairlock (Background ctx)", background: true})
			}
		}
		res.Uncontended = runUncontended(rows, e, mon, *uncDur, *uncRounds, *uncPool)
		for _, r := range res.Uncontended {
			logf("uncontended %-9s %7.0f cycles/s p50 %6.0f µs (PING %.0f µs) %s", r.Peer, r.CyclesPerSec, r.P50us, r.LocalPingus, r.Note)
		}
		clean()
		if *sideBySide != "" && peerNamed(peers, "fairlock") {
			sb := runSideBySide(*sideBySide, *sideBySideTime)
			res.SideBySide = &sb
			logf("side-by-side (go test): fairlock/naive %.3f (fairlock %.0f, naive %.0f cycles/s; allocs/cycle %.1f vs %.1f; %d slices, ratio %.2f–%.2f) %s",
				sb.Ratio, sb.FairlockCyclesPerSec, sb.NaiveCyclesPerSec, sb.FairlockAllocs, sb.NaiveAllocs, sb.Slices, sb.SliceRatioMin, sb.SliceRatioMax, sb.Note)
		}
		flush()
	}
	if scen["contended"] {
		for _, p := range peers {
			r := runContended(p, e, mon, *cWorkers, *cHold, *cDur, "contended")
			res.Contended = append(res.Contended, r)
			logContended(r)
			clean()
		}
		flush()
	}
	if scen["contended-mp"] {
		for _, p := range peers {
			r := runContendedMP(p, e, mon, *mpProcs, *mpWorkers, *cHold, *mpDur, "contended-mp")
			res.Contended = append(res.Contended, r)
			logContended(r)
			clean()
		}
		flush()
	}
	if scen["fifo"] {
		for _, p := range peers {
			r := runFIFO(p, e, mon, *fWaiters, *fRounds, *fSpacing, *fHold)
			res.FIFO = append(res.FIFO, r)
			logf("fifo %-9s inversions %d/%d per hand-off %.0f µs %s", p.Name, r.Inversions, r.MaxInversions, r.PerHandoffus, r.Note)
			clean()
		}
		flush()
	}
	if scen["scale"] {
		sp := nameSet(*scalePeers)
		for _, p := range peers {
			if !sp[p.Name] {
				continue
			}
			run := func(names, per int, c string) {
				if p.Name != "fairlock" && names*per > *scalePeerMax {
					return
				}
				r := runScale(p, e, mon, names, per, 1, nil, c)
				res.Scale = append(res.Scale, r)
				logf("scale %-9s %-10s drain %8.1f ms, %.2f cmds/grant, %.2f RT/grant, %.0f B/waiter (heap %.0f), pubsub %d, used_memory %d %s",
					p.Name, c, r.DrainMs, r.ServerCmdsPerGrant, r.RoundTripsPerGrant, r.HeapStackPerWaiter, r.HeapPerWaiter, r.PubsubConns, r.UsedMemoryPeak, r.Note)
				clean()
			}
			for _, n := range counts(*scaleOne) {
				run(1, n, fmt.Sprintf("1x%d", n))
			}
			if *scaleNames > 0 {
				run(*scaleNames, *scalePer, fmt.Sprintf("%dx%d", *scaleNames, *scalePer))
			}
		}
		if idle := counts(*scaleIdle); len(idle) > 0 {
			logIdle := func(r IdleResult) {
				logf("scale idle %-9s %d %-7s %7.1f cmds/s, Redis CPU %.2f%% of a core, %.0f B/one in Redis, %.0f B/one client heap, setup %.0f ms %s",
					r.Peer, r.Count, r.Case, r.CmdsPerS, r.CPUPct, r.MemPer, r.HeapPer, r.SetupMs, r.Note)
				res.Idle = append(res.Idle, r)
			}
			logIdle(runIdleNone(mon, *scaleIdleDur))
			for _, p := range peers {
				if !sp[p.Name] {
					continue
				}
				for _, n := range idle {
					// A spinner's lease has no upkeep (nor renewal): only
					// its waiters are worth the comparison.
					if p.Name == "fairlock" {
						logIdle(runIdleLeases(p, e, mon, n, *scaleIdleWait, *scaleIdleDur))
						clean()
					}
					if p.Name == "fairlock" || n <= *scalePeerMax {
						logIdle(runIdleWaiters(p, e, mon, n, *scaleIdleWait, *scaleIdleDur))
						clean()
					}
				}
			}
		}
		flush()
	}
	// The semaphore and read-write lock rows: for the peers that have both.
	var kindPeers []peer
	for _, p := range peers {
		if p.Kinds != nil {
			kindPeers = append(kindPeers, p)
		}
	}
	logKind := func(r KindResult) {
		logf("%s %-9s %6.0f grants/s jain %.4f wait p99 %6.1f ms max %6.1f ms in use %.0f%% over capacity %d/%d order broken %d of %d (by %s) readers past a writer %d clients %d conns %d %s",
			r.Kind, r.Peer, r.GrantsPerSec, r.Jain, r.WaitP99us/1e3, r.WaitMaxus/1e3, 100*r.InUse, r.OverCapacity, r.OverCapacityAtomic, r.OrderBroken, r.OrderChecked, r.OrderBy, r.PassedWriter, r.Clients, r.Conns, r.Note)
	}
	if scen["semaphore"] {
		for _, p := range kindPeers {
			r := runSemaphore(p, e, mon, *semCap, *semWorkers, *semHold, *semDur)
			res.Semaphore = append(res.Semaphore, r)
			logKind(r)
			clean()
		}
		flush()
	}
	if scen["semaphore-weighted"] {
		for _, p := range kindPeers {
			r := runWeighted(p, e, mon, *semCap, *wWorkers, *wBig, *semHold, *wDur)
			res.Weighted = append(res.Weighted, r)
			logKind(r)
			if r.Big != nil {
				logf("semaphore-weighted %-9s big worker (%d permits): %d grants, wait p99 %.1f ms; small workers: %.1f grants each, wait p99 %.1f ms", r.Peer, r.BigPermits, r.Big.Grants, r.Big.WaitP99us/1e3, r.SmallMeanGrants, r.Small.WaitP99us/1e3)
			}
			clean()
		}
		flush()
	}
	if scen["tenants"] {
		layout := counts(*tLayout)
		for _, p := range kindPeers {
			rows := []struct {
				name   string
				groups bool
			}{{p.Name, false}}
			if p.Name == "fairlock" {
				rows = []struct {
					name   string
					groups bool
				}{{"fairlock (groups)", true}, {"fairlock (FIFO)", false}}
			}
			for _, row := range rows {
				r := runTenants(p, row.name, row.groups, e, mon, *semCap, layout, *semHold, *tDur)
				res.Tenants = append(res.Tenants, r)
				logKind(r)
				for _, t := range r.Tenants {
					logf("tenants %-17s tenant %s (%2d workers): %6.0f grants/s, %5.1f%% of grants, wait p99 %6.1f ms", r.Peer, t.Name, t.Workers, t.GrantsPerSec, 100*t.Share, t.WaitP99us/1e3)
				}
				clean()
			}
		}
		flush()
	}
	if scen["rwmutex"] {
		for _, p := range kindPeers {
			r := runRW(p, e, mon, *rwWorkers, *rwReadPct, *rwSeed, *rwHold, *rwDur)
			res.RWMutex = append(res.RWMutex, r)
			logKind(r)
			if r.Writers != nil {
				logf("rwmutex %-9s writers: %.0f grants/s, wait p99 %.1f ms max %.1f ms; readers %.0f grants/s", r.Peer, r.Writers.GrantsPerSec, r.Writers.WaitP99us/1e3, r.Writers.WaitMaxus/1e3, r.Readers.GrantsPerSec)
			}
			clean()
		}
		flush()
	}
	if scen["semaphore-drain"] {
		dp := nameSet(*semDrainPeers)
		for _, p := range kindPeers {
			if !dp[p.Name] {
				continue
			}
			for _, n := range counts(*semDrain) {
				if p.Name != "fairlock" && n > *scalePeerMax {
					continue
				}
				r := runSemaphoreDrain(p, e, mon, *semCap, n, *semDrainGrants)
				res.SemaphoreDrain = append(res.SemaphoreDrain, r)
				logf("semaphore-drain %-9s %-8s ×%d rounds drain %8.1f ms, %.2f cmds/grant, %.1f µs Redis CPU/grant, %.2f RT/grant, conns %d %s",
					p.Name, r.Case, r.Rounds, r.DrainMs, r.ServerCmdsPerGrant, r.ServerCPUusPerGrant, r.RoundTripsPerGrant, r.Dials, r.Note)
				clean()
			}
		}
	}
	flush()
	logf("wrote %s/results.{json,md}, chart.svg", *out)
	printTargets(os.Stdout, res.Targets)
}

// printTargets writes the targets, met or missed, one a line: the end of
// run.sh's output.
func printTargets(w io.Writer, ts []Target) {
	met, na := 0, 0
	for _, t := range ts {
		if t.Met {
			met++
		}
		if t.NA {
			na++
		}
	}
	fmt.Fprintf(w, "targets: %d of %d met", met, len(ts)-na)
	if na > 0 {
		fmt.Fprintf(w, ", %d not evaluated", na)
	}
	fmt.Fprintln(w)
	for _, t := range ts {
		mark := "MISSED"
		switch {
		case t.NA:
			mark = "n/a   "
		case t.Met:
			mark = "met   "
		}
		fmt.Fprintf(w, "%s  %s: %s: %s\n", mark, t.Area, t.Target, t.Value)
	}
}

// peerNamed tells whether peers has one called name.
func peerNamed(peers []peer, name string) bool {
	for _, p := range peers {
		if p.Name == name {
			return true
		}
	}
	return false
}

// nameSet is the set of names in a comma-separated list.
func nameSet(list string) map[string]bool {
	m := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		m[strings.TrimSpace(n)] = true
	}
	return m
}

// counts parses a comma-separated list of positive counts, skipping the rest.
func counts(list string) []int {
	var out []int
	for _, s := range strings.Split(list, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

func meta(mon *monitor, e *env, peers []peer) Meta {
	m := Meta{
		Date:      time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		Nproc:     runtime.NumCPU(),
		GoVersion: runtime.Version(),
		Args:      userArgs(os.Args[1:]),
		LeaseTTL:  e.LeaseTTL.String(),
		Spin:      e.SpinDelay.String(),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	m.RedisVersion = mon.serverInfo(context.Background(), "redis_version")
	if e.EtcdEndpoint != "" {
		if o, err := exec.Command("etcd", "--version").Output(); err == nil {
			m.EtcdVersion = strings.TrimPrefix(strings.SplitN(string(o), "\n", 2)[0], "etcd Version: ")
		}
	}
	for _, p := range peers {
		m.Settings = append(m.Settings, p.Name+": "+p.Settings)
		if p.KindSettings != "" {
			m.Settings = append(m.Settings, p.Name+" (semaphore, read-write lock): "+p.KindSettings)
		}
	}
	return m
}

// userArgs drops the flags run.sh sets for this machine (addresses, PIDs,
// paths), keeping those that change what is measured.
func userArgs(args []string) []string {
	drop := map[string]bool{"redis": true, "etcd": true, "etcd-pid": true, "out": true, "cpuprofile": true, "baseline": true}
	var out []string
	for i := 0; i < len(args); i++ {
		a := strings.TrimLeft(args[i], "-")
		name, _, hasValue := strings.Cut(a, "=")
		if drop[name] {
			if !hasValue {
				i++ // the value is the next argument
			}
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// warm keeps two clients busy with PINGs for d: on this VM the first
// seconds after an idle spell run markedly slower, which would count against
// whichever peer runs first.
func warm(e *env, d time.Duration) {
	ctx := context.Background()
	end := time.Now().Add(d)
	done := make(chan struct{})
	for i := 0; i < 2; i++ {
		go func() {
			defer func() { done <- struct{}{} }()
			cl := newRedisClient(e.RedisAddr, nil)
			defer cl.Close()
			for time.Now().Before(end) {
				cl.Ping(ctx)
			}
		}()
	}
	<-done
	<-done
}
