package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"
)

// scenario is one name of -scenarios.
type scenario struct {
	name string
	// flags registers the flags it reads, beside the common ones.
	flags func(fs *flag.FlagSet, c *config)
	// run runs it on the peers and adds its rows to the results. Every
	// scenario uses the redis-server at -redis (etcd's peer the etcd at
	// -etcd), which run.sh starts; the servers or processes a scenario
	// starts itself are in its doc comment.
	run func(b *bench)
}

// scenarios run in this order, whatever the order of -scenarios; its
// default lists them all.
var scenarios = []scenario{
	{"limit", limitFlags, (*bench).limit},                                // Results.Limit
	{"uncontended", uncontendedFlags, (*bench).uncontended},              // Results.Uncontended, SideBySide
	{"names", namesFlags, (*bench).names},                                // Results.Names, NamesSideBySide
	{"contended", contendedFlags, (*bench).contended},                    // Results.Contended, one process
	{"contended-mp", contendedMPFlags, (*bench).contendedMP},             // Results.Contended, several processes
	{"fifo", fifoFlags, (*bench).fifo},                                   // Results.FIFO
	{"scale", scaleFlags, (*bench).scale},                                // Results.Scale, Idle
	{"semaphore", semaphoreFlags, (*bench).semaphore},                    // Results.Semaphore
	{"semaphore-weighted", weightedFlags, (*bench).weighted},             // Results.Weighted
	{"tenants", tenantsFlags, (*bench).tenants},                          // Results.Tenants
	{"tenants-weighted", weightedTenantsFlags, (*bench).weightedTenants}, // Results.WeightedTenants
	{"priority-lanes", priorityLanesFlags, (*bench).priorityLanes},       // Results.PriorityLanes
	{"rwmutex", rwFlags, (*bench).rwmutex},                               // Results.RWMutex
	{"semaphore-drain", semaphoreDrainFlags, (*bench).semaphoreDrain},    // Results.SemaphoreDrain
}

// bench is what the scenarios run with: the flags, the peers, the
// monitor's Redis client and the results so far.
type bench struct {
	cfg   *config
	env   *env
	mon   *monitor
	peers []peer
	res   *Results
	start time.Time
}

// newBench checks that Redis answers, notes the run's settings and warms
// the machine up.
func newBench(c *config) *bench {
	var peers []peer
	for _, n := range strings.Split(c.peers, ",") {
		p, ok := peerByName(strings.TrimSpace(n))
		if !ok {
			log.Fatalf("unknown peer %q", n)
		}
		peers = append(peers, p)
	}
	e := c.env()
	mon := newMonitor(e.RedisAddr, c.etcdPID)
	if err := mon.cl.Ping(context.Background()).Err(); err != nil {
		log.Fatalf("redis at %s: %v", e.RedisAddr, err)
	}
	b := &bench{cfg: c, env: e, mon: mon, peers: peers, res: &Results{Meta: meta(mon, e, peers)}}
	if c.baseline != "" {
		b.res.Baseline = mustLoadBaseline(c.baseline)
	}
	b.start = time.Now()
	if c.warmup > 0 {
		warm(e, c.warmup)
		b.logf("warm-up done")
	}
	return b
}

// logf writes a line of the log, stamped with the time since the start.
func (b *bench) logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(b.start).Seconds(), fmt.Sprintf(format, a...))
}

// clean empties Redis between rows, so that no row pays for another's keys.
func (b *bench) clean() { b.mon.cl.FlushAll(context.Background()) }

// flush evaluates the targets and writes the results so far.
func (b *bench) flush() {
	b.res.Meta.ElapsedS = time.Since(b.start).Seconds()
	b.res.Targets = evalTargets(b.res)
	writeAll(b.cfg.out, b.res)
}

func limitFlags(fs *flag.FlagSet, c *config) {
	fs.DurationVar(&c.limitDur, "limit-dur", 2*time.Second, "limit: duration of each measurement")
}

// limit measures one connection's PING and EVALSHA, sequential and
// pipelined.
func (b *bench) limit() {
	l, err := runLimit(b.env, b.cfg.limitDur)
	if err != nil {
		log.Fatalf("limit: %v", err)
	}
	b.res.Limit = &l
	b.logf("limit: PING p50 %.0f µs, EVALSHA %.0f/s", l.PingP50us, l.EvalshaOpsPerSec)
	b.clean()
}

func uncontendedFlags(fs *flag.FlagSet, c *config) {
	u := &c.unc
	fs.DurationVar(&u.dur, "uncontended-dur", 6*time.Second, "uncontended: duration per peer")
	fs.IntVar(&u.rounds, "uncontended-rounds", 20, "uncontended: turns per peer, the peers taking turns (6 s / 20: 300 ms, BenchmarkSideBySide's slice)")
	fs.IntVar(&u.pool, "uncontended-pool", 1, "uncontended: go-redis PoolSize of each peer's client (0: go-redis's default), as BenchmarkSideBySide")
	fs.BoolVar(&u.background, "uncontended-background", false, "uncontended: call with context.Background() instead of a fresh context with a deadline per call")
	fs.StringVar(&u.sideBySide, "sidebyside", "", "uncontended, names: test binary of ../fairlock (go test -c) whose BenchmarkSideBySide runs right after the uncontended row, and BenchmarkSideBySideManyNames right after the names row (run.sh builds bin/fairlock.test); empty: skip")
	fs.StringVar(&u.sideBySideTime, "sidebyside-benchtime", "12s", "uncontended: -test.benchtime of BenchmarkSideBySide (each peer gets half, in 300 ms slices)")
	fs.BoolVar(&u.fairlockBackground, "uncontended-fairlock-background", true, "uncontended: also run fairlock with context.Background()")
}

// uncontended runs each peer's acquire+release loop, the peers taking
// turns, then BenchmarkSideBySide's test binary, which starts a
// redis-server of its own.
func (b *bench) uncontended() {
	u := b.cfg.unc
	var rows []uncontendedRow
	for _, p := range b.peers {
		rows = append(rows, uncontendedRow{p: p, name: p.Name, background: u.background})
		if p.Name == "fairlock" && !u.background && u.fairlockBackground {
			// Callers pass both kinds of context; a context that can
			// end once cost fairlock a goroutine per call.
			rows = append(rows, uncontendedRow{p: p, name: "fairlock (Background ctx)", background: true})
		}
	}
	b.res.Uncontended = runUncontended(rows, b.env, b.mon, u.dur, u.rounds, u.pool)
	for _, r := range b.res.Uncontended {
		b.logf("uncontended %-9s %7.0f cycles/s p50 %6.0f µs (PING %.0f µs) %s", r.Peer, r.CyclesPerSec, r.P50us, r.LocalPingus, r.Note)
	}
	b.clean()
	if u.sideBySide != "" && peerNamed(b.peers, "fairlock") {
		sb := runSideBySide(u.sideBySide, u.sideBySideTime)
		b.res.SideBySide = &sb
		b.logf("side-by-side (go test): fairlock/naive %.3f (fairlock %.0f, naive %.0f cycles/s; allocs/cycle %.1f vs %.1f; %d slices, ratio %.2f–%.2f) %s",
			sb.Ratio, sb.FairlockCyclesPerSec, sb.NaiveCyclesPerSec, sb.FairlockAllocs, sb.NaiveAllocs, sb.Slices, sb.SliceRatioMin, sb.SliceRatioMax, sb.Note)
	}
}

func contendedFlags(fs *flag.FlagSet, c *config) {
	fs.IntVar(&c.cont.workers, "contended-workers", 16, "contended: workers (one client each)")
	fs.DurationVar(&c.cont.hold, "contended-hold", time.Millisecond, "contended: hold time")
	fs.DurationVar(&c.cont.dur, "contended-dur", 10*time.Second, "contended: duration per peer")
}

// contended runs -contended-workers goroutines on one name, per peer.
func (b *bench) contended() {
	c := b.cfg.cont
	for _, p := range b.peers {
		b.addContended(runContended(p, b.env, b.mon, c.workers, c.hold, c.dur, "contended"))
	}
}

func contendedMPFlags(fs *flag.FlagSet, c *config) {
	fs.IntVar(&c.mp.procs, "mp-procs", 4, "contended-mp: processes")
	fs.IntVar(&c.mp.workers, "mp-workers", 4, "contended-mp: workers per process")
	fs.DurationVar(&c.mp.dur, "mp-dur", 10*time.Second, "contended-mp: duration per peer")
}

// contendedMP is contended over -mp-procs worker processes of this
// binary (-child), which it starts and stops; its hold is -contended-hold.
func (b *bench) contendedMP() {
	m := b.cfg.mp
	for _, p := range b.peers {
		b.addContended(runContendedMP(p, b.env, b.mon, m.procs, m.workers, b.cfg.cont.hold, m.dur, "contended-mp"))
	}
}

func (b *bench) addContended(r ContendedResult) {
	b.res.Contended = append(b.res.Contended, r)
	b.logf("contended %s %-9s %6.0f grants/s jain %.4f gap p50 %5.0f µs (release call %4.0f µs) wait p99 %6.1f ms RT/grant %.2f barging %.0f%% overlaps %d/%d %s",
		r.Variant, r.Peer, r.GrantsPerSec, r.Jain, r.GapP50us, r.ReleaseP50us, r.WaitP99us/1e3, r.RoundTripsPerGrant, r.BargingPct, r.Overlaps, r.OverlapsAtomic, r.Note)
	b.clean()
}

func fifoFlags(fs *flag.FlagSet, c *config) {
	f := &c.fifo
	fs.IntVar(&f.waiters, "fifo-waiters", 20, "fifo: waiters")
	fs.DurationVar(&f.spacing, "fifo-spacing", 20*time.Millisecond, "fifo: arrival spacing")
	fs.DurationVar(&f.hold, "fifo-hold", 0, "fifo: hold time of each waiter")
	fs.IntVar(&f.rounds, "fifo-rounds", 5, "fifo: rounds per peer")
}

// fifo queues waiters at a spacing behind a holder, per peer.
func (b *bench) fifo() {
	f := b.cfg.fifo
	for _, p := range b.peers {
		r := runFIFO(p, b.env, b.mon, f.waiters, f.rounds, f.spacing, f.hold)
		b.res.FIFO = append(b.res.FIFO, r)
		b.logf("fifo %-9s inversions %d/%d per hand-off %.0f µs %s", p.Name, r.Inversions, r.MaxInversions, r.PerHandoffus, r.Note)
		b.clean()
	}
}

func scaleFlags(fs *flag.FlagSet, c *config) {
	s := &c.scale
	fs.StringVar(&s.single, "scale-single", "10,100,1000,10000", "scale: waiter counts on one name")
	fs.IntVar(&s.names, "scale-names", 1000, "scale: names of the many-names case (0 = skip)")
	fs.IntVar(&s.perName, "scale-per-name", 10, "scale: waiters per name in the many-names case")
	fs.StringVar(&s.peers, "scale-peers", "fairlock,naive", "scale: peers")
	fs.IntVar(&s.peerMax, "scale-peer-max", 100, "scale, semaphore-drain: largest waiter count run for peers other than fairlock")
	fs.StringVar(&s.idle, "scale-idle", "1,100,1000,10000", "scale: counts of held leases (one Locker, as many names) and of waiters (one Locker, one name) kept idle (empty: skip)")
	fs.DurationVar(&s.idleDur, "scale-idle-dur", 4*time.Second, "scale: idle window of each idle case (fairlock's default heartbeat is 1 s)")
	fs.DurationVar(&s.idleSettle, "scale-idle-settle", 1500*time.Millisecond, "scale: wait after an idle case's setup, before its window, so that the window holds no setup work")
}

// scale drains waiters queued on one name and on many, per peer of
// -scale-peers, then keeps leases and waiters idle.
func (b *bench) scale() {
	s := b.cfg.scale
	sp := nameSet(s.peers)
	for _, p := range b.peers {
		if sp[p.Name] {
			b.scaleDrains(p)
		}
	}
	if idle := counts(s.idle); len(idle) > 0 {
		b.scaleIdle(sp, idle)
	}
}

// scaleDrains runs p's drain cases, those of more waiters than
// -scale-peer-max only for fairlock.
func (b *bench) scaleDrains(p peer) {
	s := b.cfg.scale
	run := func(names, per int, c string) {
		if p.Name != "fairlock" && names*per > s.peerMax {
			return
		}
		r := runScale(p, b.env, b.mon, names, per, 1, nil, c)
		b.res.Scale = append(b.res.Scale, r)
		b.logf("scale %-9s %-10s drain %8.1f ms, %.2f cmds/grant, %.2f RT/grant, %.0f B/waiter (heap %.0f), pubsub %d, used_memory %d %s",
			p.Name, c, r.DrainMs, r.ServerCmdsPerGrant, r.RoundTripsPerGrant, r.HeapStackPerWaiter, r.HeapPerWaiter, r.PubsubConns, r.UsedMemoryPeak, r.Note)
		b.clean()
	}
	for _, n := range counts(s.single) {
		run(1, n, fmt.Sprintf("1x%d", n))
	}
	if s.names > 0 {
		run(s.names, s.perName, fmt.Sprintf("%dx%d", s.names, s.perName))
	}
}

// scaleIdle runs Redis alone, then the idle cases of the peers in sp.
func (b *bench) scaleIdle(sp map[string]bool, idle []int) {
	s := b.cfg.scale
	b.addIdle(runIdleNone(b.mon, s.idleDur))
	for _, p := range b.peers {
		if !sp[p.Name] {
			continue
		}
		for _, n := range idle {
			// A spinner's lease has no upkeep (nor renewal): only
			// its waiters are worth the comparison.
			if p.Name == "fairlock" {
				b.addIdle(runIdleLeases(p, b.env, b.mon, n, s.idleSettle, s.idleDur))
				b.clean()
			}
			if p.Name == "fairlock" || n <= s.peerMax {
				b.addIdle(runIdleWaiters(p, b.env, b.mon, n, s.idleSettle, s.idleDur))
				b.clean()
			}
		}
	}
}

func (b *bench) addIdle(r IdleResult) {
	b.logf("scale idle %-9s %d %-7s %7.1f cmds/s, Redis CPU %.2f%% of a core, %.0f B/one in Redis, %.0f B/one client heap, setup %.0f ms %s",
		r.Peer, r.Count, r.Case, r.CmdsPerS, r.CPUPct, r.MemPer, r.HeapPer, r.SetupMs, r.Note)
	b.res.Idle = append(b.res.Idle, r)
}

// kindPeers are the peers that have a semaphore and a read-write lock: the
// peers of the scenarios from semaphore on.
func (b *bench) kindPeers() []peer {
	var ps []peer
	for _, p := range b.peers {
		if p.Kinds != nil {
			ps = append(ps, p)
		}
	}
	return ps
}

// addKind adds a semaphore or read-write lock row to rows and logs it,
// with the figures of its kind.
func (b *bench) addKind(rows *[]KindResult, r KindResult) {
	*rows = append(*rows, r)
	b.logf("%s %-9s %6.0f grants/s jain %.4f wait p99 %6.1f ms max %6.1f ms in use %.0f%% over capacity %d/%d order broken %d of %d (by %s) readers past a writer %d clients %d conns %d %s",
		r.Kind, r.Peer, r.GrantsPerSec, r.Jain, r.WaitP99us/1e3, r.WaitMaxus/1e3, 100*r.InUse, r.OverCapacity, r.OverCapacityAtomic, r.OrderBroken, r.OrderChecked, r.OrderBy, r.PassedWriter, r.Clients, r.Conns, r.Note)
	if r.Big != nil {
		b.logf("semaphore-weighted %-9s big worker (%d permits): %d grants, wait p99 %.1f ms; small workers: %.1f grants each, wait p99 %.1f ms", r.Peer, r.BigPermits, r.Big.Grants, r.Big.WaitP99us/1e3, r.SmallMeanGrants, r.Small.WaitP99us/1e3)
	}
	for _, t := range r.Tenants {
		b.logf("tenants %-17s tenant %s (%2d workers): %6.0f grants/s, %5.1f%% of grants, wait p99 %6.1f ms", r.Peer, t.Name, t.Workers, t.GrantsPerSec, 100*t.Share, t.WaitP99us/1e3)
	}
	if l := r.Lanes; l != nil {
		b.logf("priority-lanes %-21s interactive: %.0f grants/s, wait p50 %.2f ms p99 %.2f ms max %.1f ms; batch: %.0f grants/s, wait p50 %.2f ms p99 %.2f ms max %.1f ms (bound %.1f ms)",
			r.Peer, l.Interactive.GrantsPerSec, l.Interactive.WaitP50us/1e3, l.Interactive.WaitP99us/1e3, l.Interactive.WaitMaxus/1e3,
			l.Batch.GrantsPerSec, l.Batch.WaitP50us/1e3, l.Batch.WaitP99us/1e3, l.Batch.WaitMaxus/1e3, (l.AgingBoundus+l.FIFOBoundus)/1e3)
	}
	if r.Writers != nil {
		b.logf("rwmutex %-9s writers: %.0f grants/s, wait p99 %.1f ms max %.1f ms; readers %.0f grants/s", r.Peer, r.Writers.GrantsPerSec, r.Writers.WaitP99us/1e3, r.Writers.WaitMaxus/1e3, r.Readers.GrantsPerSec)
	}
	b.clean()
}

func semaphoreFlags(fs *flag.FlagSet, c *config) {
	s := &c.sem
	fs.IntVar(&s.capacity, "sem-capacity", 4, "semaphore, semaphore-drain: capacity (every request takes 1 permit)")
	fs.IntVar(&s.workers, "sem-workers", 16, "semaphore: workers (one client each)")
	fs.DurationVar(&s.hold, "sem-hold", time.Millisecond, "semaphore: hold time")
	fs.DurationVar(&s.dur, "sem-dur", 10*time.Second, "semaphore: duration per peer")
}

// semaphore runs -sem-workers on one semaphore, 1 permit a request.
func (b *bench) semaphore() {
	s := b.cfg.sem
	for _, p := range b.kindPeers() {
		b.addKind(&b.res.Semaphore, runSemaphore(p, b.env, b.mon, s.capacity, s.workers, s.hold, s.dur))
	}
}

func weightedFlags(fs *flag.FlagSet, c *config) {
	w := &c.weighted
	fs.IntVar(&w.workers, "weighted-workers", 16, "semaphore-weighted: workers (one client each): one big, the rest 1 permit")
	fs.IntVar(&w.big, "weighted-big", 4, "semaphore-weighted: permits of the big worker's requests (capacity: -sem-capacity)")
	fs.DurationVar(&w.dur, "weighted-dur", 10*time.Second, "semaphore-weighted: duration per peer (hold: -sem-hold)")
}

// weighted is semaphore with one worker asking for -weighted-big permits.
func (b *bench) weighted() {
	s, w := b.cfg.sem, b.cfg.weighted
	for _, p := range b.kindPeers() {
		b.addKind(&b.res.Weighted, runWeighted(p, b.env, b.mon, s.capacity, w.workers, w.big, s.hold, w.dur))
	}
}

func tenantsFlags(fs *flag.FlagSet, c *config) {
	fs.StringVar(&c.tenants.layout, "tenants", "13,1,1,1", "tenants: workers of each tenant (A, B, ...), one client each (capacity: -sem-capacity)")
	fs.DurationVar(&c.tenants.dur, "tenants-dur", 10*time.Second, "tenants: duration per row (hold: -sem-hold)")
}

// tenants is semaphore with the workers in tenants of unequal demand;
// fairlock runs twice, with groups and plain FIFO.
func (b *bench) tenants() {
	s, t := b.cfg.sem, b.cfg.tenants
	layout := counts(t.layout)
	for _, p := range b.kindPeers() {
		run := func(row string, groups bool) {
			b.addKind(&b.res.Tenants, runTenants(p, row, groups, nil, b.env, b.mon, s.capacity, layout, s.hold, t.dur))
		}
		if p.Name == "fairlock" {
			run("fairlock (groups)", true)
			run("fairlock (FIFO)", false)
		} else {
			run(p.Name, false)
		}
	}
}

func weightedTenantsFlags(fs *flag.FlagSet, c *config) {
	t := &c.weightedTenants
	fs.StringVar(&t.layout, "wt-tenants", "6,6,6,6", "tenants-weighted: workers of each tenant (A, B, ...), one client each")
	fs.StringVar(&t.weights, "wt-weights", "1,2,3,4", "tenants-weighted: each tenant's weight (WithGroupWeight)")
	fs.IntVar(&t.capacity, "wt-capacity", 8, "tenants-weighted: capacity (hold: -sem-hold)")
	fs.DurationVar(&t.dur, "wt-dur", 10*time.Second, "tenants-weighted: duration per row")
}

// weightedTenants is tenants of equal demand and unequal weights, on
// fairlock only (no peer has weights): with weights, and with groups alone
// for comparison.
func (b *bench) weightedTenants() {
	t := b.cfg.weightedTenants
	layout, weights := counts(t.layout), counts(t.weights)
	if len(weights) != len(layout) {
		log.Fatalf("-wt-weights %q: want one weight per tenant of -wt-tenants %q", t.weights, t.layout)
	}
	for _, p := range b.kindPeers() {
		if p.Name != "fairlock" {
			continue
		}
		b.addKind(&b.res.WeightedTenants, runTenants(p, "fairlock (weights)", true, weights, b.env, b.mon, t.capacity, layout, b.cfg.sem.hold, t.dur))
		b.addKind(&b.res.WeightedTenants, runTenants(p, "fairlock (groups)", true, nil, b.env, b.mon, t.capacity, layout, b.cfg.sem.hold, t.dur))
	}
}

func priorityLanesFlags(fs *flag.FlagSet, c *config) {
	l := &c.priorityLanes
	fs.IntVar(&l.batch, "pl-batch", 12, "priority-lanes: batch workers (priority 0, one client each), who ask again at once")
	fs.IntVar(&l.interactive, "pl-interactive", 2, "priority-lanes: interactive workers (priority 9, one client each), who pause -pl-pause after each release")
	fs.IntVar(&l.capacity, "pl-capacity", 2, "priority-lanes: capacity of the semaphore, every request 1 permit (hold: -sem-hold)")
	fs.DurationVar(&l.pause, "pl-pause", 20*time.Millisecond, "priority-lanes: an interactive worker's pause after each release")
	fs.DurationVar(&l.aging, "pl-aging", 500*time.Millisecond, "priority-lanes: WithPriorityAging of every Locker of the row with priorities (the batch workers' wait bound is 9 × this more than FIFO's)")
	fs.DurationVar(&l.dur, "pl-dur", 10*time.Second, "priority-lanes: duration per row (three rows: with priorities, every request at priority 0, and saturated)")
	fs.DurationVar(&l.saturatedAging, "pl-saturated-aging", 100*time.Millisecond, "priority-lanes: WithPriorityAging of the saturated row, where capacity+2 interactive workers ask again at once: only aging lets the batch workers in")
}

// priorityLanes is a batch backlog at priority 0 beside interactive
// workers at maxPriority, on fairlock only (no peer has priorities); the
// same workers with every request at priority 0, to show what the
// priorities buy the interactive ones; and a saturated row, where the
// interactive workers alone keep every permit busy, to show aging bound
// the batch workers' wait.
func (b *bench) priorityLanes() {
	for _, p := range b.kindPeers() {
		if p.Name != "fairlock" {
			continue
		}
		b.addKind(&b.res.PriorityLanes, runPriorityLanes(p, "fairlock (priorities)", true, b.env, b.mon, b.cfg.priorityLanes, b.cfg.sem.hold))
		b.addKind(&b.res.PriorityLanes, runPriorityLanes(p, "fairlock (FIFO)", false, b.env, b.mon, b.cfg.priorityLanes, b.cfg.sem.hold))
		s := b.cfg.priorityLanes
		s.interactive, s.pause, s.aging = s.capacity+2, 0, s.saturatedAging
		r := runPriorityLanes(p, fmt.Sprintf("fairlock (saturated: %d interactive workers, no pause, aging %v)", s.interactive, s.aging), true, b.env, b.mon, s, b.cfg.sem.hold)
		if r.Lanes != nil {
			r.Lanes.Saturated = true
		}
		b.addKind(&b.res.PriorityLanes, r)
	}
}

func rwFlags(fs *flag.FlagSet, c *config) {
	rw := &c.rw
	fs.IntVar(&rw.workers, "rw-workers", 16, "rwmutex: workers (one client each)")
	fs.IntVar(&rw.readPct, "rw-read-pct", 90, "rwmutex: share of cycles that read, in %, drawn per cycle")
	fs.Uint64Var(&rw.seed, "rw-seed", 1, "rwmutex: seed of each worker's draws (with its number)")
	fs.DurationVar(&rw.hold, "rw-hold", time.Millisecond, "rwmutex: hold time, readers and writers")
	fs.DurationVar(&rw.dur, "rw-dur", 10*time.Second, "rwmutex: duration per peer")
}

// rwmutex runs -rw-workers on one read-write lock, each cycle a reader or
// a writer.
func (b *bench) rwmutex() {
	rw := b.cfg.rw
	for _, p := range b.kindPeers() {
		b.addKind(&b.res.RWMutex, runRW(p, b.env, b.mon, rw.workers, rw.readPct, rw.seed, rw.hold, rw.dur))
	}
}

func semaphoreDrainFlags(fs *flag.FlagSet, c *config) {
	d := &c.drain
	fs.StringVar(&d.counts, "sem-drain", "10,10000", "semaphore-drain: waiter counts on one semaphore")
	fs.StringVar(&d.peers, "sem-drain-peers", "fairlock", "semaphore-drain: peers (a spinner, which cannot say when all its waiters wait, sleeps 200 ms a round)")
	fs.IntVar(&d.grants, "sem-drain-grants", 1000, "semaphore-drain: a case of fewer waiters runs in rounds until it has made this many grants")
}

// semaphoreDrain is scale's drain on one semaphore of -sem-capacity, per
// peer of -sem-drain-peers; more waiters than -scale-peer-max only for
// fairlock.
func (b *bench) semaphoreDrain() {
	d := b.cfg.drain
	dp := nameSet(d.peers)
	for _, p := range b.kindPeers() {
		if !dp[p.Name] {
			continue
		}
		for _, n := range counts(d.counts) {
			if p.Name != "fairlock" && n > b.cfg.scale.peerMax {
				continue
			}
			r := runSemaphoreDrain(p, b.env, b.mon, b.cfg.sem.capacity, n, d.grants)
			b.res.SemaphoreDrain = append(b.res.SemaphoreDrain, r)
			b.logf("semaphore-drain %-9s %-8s ×%d rounds drain %8.1f ms, %.2f cmds/grant, %.1f µs Redis CPU/grant, %.2f RT/grant, conns %d %s",
				p.Name, r.Case, r.Rounds, r.DrainMs, r.ServerCmdsPerGrant, r.ServerCPUusPerGrant, r.RoundTripsPerGrant, r.Dials, r.Note)
			b.clean()
		}
	}
}
