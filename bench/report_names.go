package main

import (
	"fmt"
	"math"
	"strings"
)

// namesRow returns peer's row of the names scenario, or nil.
func namesRow(rows []NamesResult, peer string) *NamesResult {
	for i := range rows {
		if rows[i].Peer == peer {
			return &rows[i]
		}
	}
	return nil
}

// namesRan returns the naive and fairlock rows if both made cycles.
func namesRan(res *Results) (naive, fl *NamesResult, ok bool) {
	naive, fl = namesRow(res.Names, "naive"), namesRow(res.Names, "fairlock")
	ok = naive != nil && fl != nil && naive.Cycles > 0 && fl.Cycles > 0
	return naive, fl, ok
}

// namesRatios are fairlock's cycles/s, Redis CPU per cycle and client
// CPU per cycle over naive's.
func namesRatios(naive, fl NamesSide) (rate, redis, client float64) {
	return fl.CyclesPerSec / naive.CyclesPerSec, fl.RedisCPUus / naive.RedisCPUus, fl.ClientCPUus / naive.ClientCPUus
}

// namesTargets are the many-names targets, fairlock against naive in the
// bench and in BenchmarkSideBySideManyNames (cycles/s ≥ 0.95×, Redis and
// client CPU per cycle ≤ 1.25× each), and the two harnesses in agreement.
func namesTargets(res *Results) []Target {
	var ts []Target
	// A binary without fairlock (run.sh's fallback) notes it on the row:
	// not an error of the row.
	if fl := namesRow(res.Names, "fairlock"); fl != nil && fl.Note != "" && fairlockBuilt {
		ts = append(ts, Target{Area: "Many names", Target: "no errors (bench)", Value: fl.Note})
	}
	if naive, fl, ok := namesRan(res); ok {
		rate, redis, client := namesRatios(naive.NamesSide, fl.NamesSide)
		ts = append(ts, ratioTargets("bench", naive.NamesSide, fl.NamesSide, rate, redis, client)...)
	}
	sb := res.NamesSideBySide
	switch {
	case sb == nil:
	case sb.Ratio == 0:
		ts = append(ts, Target{Area: "Many names", Target: "cycles/s ≥ 0.95× naive (go test)", Value: "did not run: " + sb.Note})
	default:
		ts = append(ts, ratioTargets("go test", sb.Naive, sb.Fairlock, sb.Ratio, sb.RedisRatio, sb.ClientRatio)...)
		ts = append(ts, namesAgreement(res)...)
	}
	return ts
}

// ratioTargets are the three many-names targets of one harness.
func ratioTargets(harness string, naive, fl NamesSide, rate, redis, client float64) []Target {
	area, of := "Many names", " ("+harness+")"
	return []Target{
		{Area: area, Target: "cycles/s ≥ 0.95× naive" + of,
			Value: fmt.Sprintf("%.0f vs %.0f = %.3f×", fl.CyclesPerSec, naive.CyclesPerSec, rate), Met: rate >= 0.95},
		{Area: area, Target: "Redis CPU per cycle ≤ 1.25× naive" + of,
			Value: fmt.Sprintf("%.2f vs %.2f µs = %.3f× (Redis commands/cycle %.2f vs %.2f)", fl.RedisCPUus, naive.RedisCPUus, redis, fl.RedisCmds, naive.RedisCmds), Met: redis <= 1.25},
		{Area: area, Target: "client CPU per cycle ≤ 1.25× naive" + of,
			Value: fmt.Sprintf("%.2f vs %.2f µs = %.3f×", fl.ClientCPUus, naive.ClientCPUus, client), Met: client <= 1.25},
	}
}

// namesAgreement says whether the bench's fairlock/naive cycles/s and
// BenchmarkSideBySideManyNames's agree within noise, as the uncontended
// row's two do: they differ by at most 2σ of the difference, σ from each
// harness's turn pairs. Nothing
// if either did not run; not evaluated if the bench ran another number
// of workers than the benchmark's.
func namesAgreement(res *Results) []Target {
	naive, fl, ok := namesRan(res)
	sb := res.NamesSideBySide
	if !ok || sb == nil || sb.Ratio == 0 {
		return nil
	}
	bench := fl.CyclesPerSec / naive.CyclesPerSec
	_, seBench, n := pairedRatio(fl.TurnRates, naive.TurnRates)
	seSide := 0.0
	if sb.Slices > 1 {
		seSide = sb.SliceRatioSD / math.Sqrt(float64(sb.Slices))
	}
	d, tol := math.Abs(bench-sb.Ratio), 2*math.Hypot(seBench, seSide)
	t := Target{Area: "Many names", Target: "bench and go test fairlock/naive cycles/s agree within noise (they differ by ≤ 2σ of the difference, σ from their turn pairs)",
		Value: fmt.Sprintf("%.3f vs %.3f: Δ %.3f, 2σ %.3f (bench %d turn pairs, go test %d)", bench, sb.Ratio, d, tol, n, sb.Slices), Met: d <= tol}
	if fl.Workers != namesInRepoWorkers {
		t.NA, t.Met = true, false
		t.Value += fmt.Sprintf("; not compared: %d workers, the benchmark's %d", fl.Workers, namesInRepoWorkers)
	}
	return []Target{t}
}

// namesTables writes the names section: the bench's rows, then the bench
// and BenchmarkSideBySideManyNames side by side.
func namesTables(b *strings.Builder, res *Results) {
	if len(res.Names) == 0 {
		return
	}
	p := func(f string, a ...any) { fmt.Fprintf(b, f, a...) }
	var fl float64
	if r := namesRow(res.Names, "fairlock"); r != nil {
		fl = r.CyclesPerSec
	}
	p("## 1b. Many names: %d workers, each cycling a name of its own (acquire, release, no hold), all on one shared client per peer (go-redis's default pool; fairlock: one Locker), a fresh context.WithTimeout per call; the peers take turns (-names-rounds)\n\n", res.Names[0].Workers)
	p("| peer | cycles/s | fl÷peer | turns: cycles/s min–max | Redis CPU/cycle | client CPU/cycle | Redis cmds/cycle | round trips/cycle | conns dialled | note |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range res.Names {
		lo, hi := minMax(r.TurnRates)
		p("| %s | %.0f | %s | %.0f–%.0f | %.2f µs | %.2f µs | %.2f | %.2f | %d | %s |\n", r.Peer, r.CyclesPerSec, ratio(fl, r.CyclesPerSec), lo, hi, r.RedisCPUus, r.ClientCPUus, r.RedisCmds, r.RoundTripsPerCycle, r.Conns, r.Note)
	}
	p("\nClient CPU is the bench process's (getrusage) over the row's turns: the workers, go-redis, the runtime, and whatever else ran in the process meanwhile (the other peers' idle clients, a Locker's heartbeat), as BenchmarkSideBySideManyNames reads it too. Redis commands leave out the monitor's INFO calls. PING p50 before the row: %.0f µs.\n\n", res.Names[0].LocalPingus)
	for _, r := range res.Names {
		if len(r.Cmdstats) > 0 {
			p("- %s Redis commands per cycle (µs per call): %s\n", r.Peer, perCycleLine(r.Cmdstats, r.UsecPer))
		}
	}
	p("\n")
	namesSideBySideTable(b, res)
}

// namesSideBySideTable writes the bench's naive and fairlock rows beside
// BenchmarkSideBySideManyNames's, and their ratios.
func namesSideBySideTable(b *strings.Builder, res *Results) {
	sb := res.NamesSideBySide
	if sb == nil {
		return
	}
	p := func(f string, a ...any) { fmt.Fprintf(b, f, a...) }
	p("### The same shape in go test: BenchmarkSideBySideManyNames (../fairlock/sidebyside_names_test.go), run right after\n\n")
	if sb.Ratio == 0 {
		p("Did not run: %s\n\n", sb.Note)
		return
	}
	p("%d workers on one shared client, naive and fairlock taking turns in slices of 300 ms, in one process, on a redis-server of its own.\n\n", namesInRepoWorkers)
	p("| harness | peer | cycles/s | Redis CPU/cycle | client CPU/cycle | Redis cmds/cycle |\n|---|---|---|---|---|---|\n")
	side := func(harness, peer string, s NamesSide) {
		p("| %s | %s | %.0f | %.2f µs | %.2f µs | %.2f |\n", harness, peer, s.CyclesPerSec, s.RedisCPUus, s.ClientCPUus, s.RedisCmds)
	}
	naive, fl, ok := namesRan(res)
	if ok {
		side("bench", "naive", naive.NamesSide)
		side("bench", "fairlock", fl.NamesSide)
	}
	side("go test", "naive", sb.Naive)
	side("go test", "fairlock", sb.Fairlock)
	p("\n| harness | fairlock/naive cycles/s | Redis CPU/cycle ratio | client CPU/cycle ratio |\n|---|---|---|---|\n")
	if ok {
		rate, redis, client := namesRatios(naive.NamesSide, fl.NamesSide)
		p("| bench | %.3f | %.3f | %.3f |\n", rate, redis, client)
	}
	p("| go test | %.3f | %.3f | %.3f |\n\n", sb.Ratio, sb.RedisRatio, sb.ClientRatio)
	for _, t := range namesAgreement(res) {
		p("%s: %s.\n\n", t.Target, t.Value)
	}
	p("Command: `%s`\n\n", sb.Command)
}
