package main

import (
	"encoding/json"
	"fmt"
	"html"
	"log"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Target is one line of the targets of issues 4, 9 and 10, evaluated on
// this run.
type Target struct {
	Area   string `json:"area"`
	Target string `json:"target"`
	Value  string `json:"value"`
	Met    bool   `json:"met"`
	NA     bool   `json:"na,omitempty"`
}

var spinners = map[string]bool{"redislock": true, "redsync": true, "naive": true}

func findContended(res *Results, peer, variant string) *ContendedResult {
	for i := range res.Contended {
		c := &res.Contended[i]
		if c.Peer == peer && c.Variant == variant && c.Note == "" || c.Peer == peer && c.Variant == variant && c.GrantsTotal > 0 {
			return c
		}
	}
	return nil
}

// contendedVariants are the variants of the contended rows ("16x1",
// "4x4"), in the order they ran.
func contendedVariants(res *Results) []string {
	var vs []string
	seen := map[string]bool{}
	for _, c := range res.Contended {
		if !seen[c.Variant] {
			seen[c.Variant] = true
			vs = append(vs, c.Variant)
		}
	}
	return vs
}

// tally counts the targets met and those not evaluated.
func tally(ts []Target) (met, na int) {
	for _, t := range ts {
		if t.Met {
			met++
		}
		if t.NA {
			na++
		}
	}
	return met, na
}

func rtt(res *Results) float64 {
	if res.Limit == nil || res.Limit.PingP50us == 0 {
		return math.NaN()
	}
	return res.Limit.PingP50us
}

// xl formats a latency in µs as a multiple of the PING round trip measured
// right before the row's run (local), else of the limit scenario's.
func xl(res *Results, local, v float64) string {
	if local > 0 {
		return fmt.Sprintf(" (%.1f×)", v/local)
	}
	return xr(res, v)
}

// xr formats a latency in µs as a multiple of the PING round trip.
func xr(res *Results, v float64) string {
	r := rtt(res)
	if math.IsNaN(r) {
		return ""
	}
	return fmt.Sprintf(" (%.1f×)", v/r)
}

func evalTargets(res *Results) []Target {
	var ts []Target
	add := func(area, target, value string, met bool) {
		ts = append(ts, Target{Area: area, Target: target, Value: value, Met: met})
	}
	// uncontended: issue 4 against the fastest peer, issue 9 against the
	// naive spin lock, for both kinds of context; the fair-lock issue's
	// 1.0× naive with a fresh deadline per call, here and in the plain loop
	// (BenchmarkSideBySide), and the two in agreement.
	var naive, fl *UncontendedResult
	best, bestName := 0.0, ""
	for i := range res.Uncontended {
		u := &res.Uncontended[i]
		if u.Peer == "fairlock" {
			fl = u
		}
		if strings.HasPrefix(u.Peer, "fairlock") {
			continue
		}
		if u.Peer == "naive" {
			naive = u
		}
		if u.CyclesPerSec > best {
			best, bestName = u.CyclesPerSec, u.Peer
		}
	}
	for _, u := range res.Uncontended {
		if !strings.HasPrefix(u.Peer, "fairlock") || u.CyclesPerSec == 0 {
			continue
		}
		variant := strings.TrimPrefix(u.Peer, "fairlock")
		deadline := variant == ""
		if deadline {
			variant = " (deadline per call)"
		}
		if best > 0 {
			add("Uncontended", "cycles/s ≥ 0.9× fastest peer"+variant,
				fmt.Sprintf("%.0f vs %s %.0f = %.2f×", u.CyclesPerSec, bestName, best, u.CyclesPerSec/best), u.CyclesPerSec >= 0.9*best)
		}
		if naive != nil && naive.CyclesPerSec > 0 {
			ratio := u.CyclesPerSec / naive.CyclesPerSec
			if deadline {
				add("Uncontended", "cycles/s ≥ 1.0× naive, a fresh deadline context per Acquire (bench)",
					fmt.Sprintf("%.0f vs %.0f = %.3f× (cycle p50 %.0f vs %.0f µs at PING p50 %.0f vs %.0f µs%s)", u.CyclesPerSec, naive.CyclesPerSec, ratio, u.P50us, naive.P50us, u.LocalPingus, naive.LocalPingus, fastMode(&u, naive)), ratio >= 1.0)
			} else {
				add("Uncontended", "cycles/s ≥ 0.9× naive"+variant+" (naive: a deadline per call)",
					fmt.Sprintf("%.0f vs %.0f = %.2f×", u.CyclesPerSec, naive.CyclesPerSec, ratio), ratio >= 0.9)
			}
			if naive.ServerCPUusPerCycle > 0 {
				add("Uncontended", "Redis CPU per cycle ≤ 1.2× naive"+variant,
					fmt.Sprintf("%.1f µs vs %.1f µs = %.2f×", u.ServerCPUusPerCycle, naive.ServerCPUusPerCycle, u.ServerCPUusPerCycle/naive.ServerCPUusPerCycle), u.ServerCPUusPerCycle <= 1.2*naive.ServerCPUusPerCycle)
			}
		}
	}
	if sb := res.SideBySide; sb != nil {
		if sb.Ratio == 0 {
			add("Uncontended", "cycles/s ≥ 1.0× naive, a fresh deadline context per Acquire (side-by-side go test)", "did not run: "+sb.Note, false)
		} else {
			add("Uncontended", "cycles/s ≥ 1.0× naive, a fresh deadline context per Acquire (side-by-side go test)",
				fmt.Sprintf("%.0f vs %.0f = %.3f× (%d slice pairs, %.2f–%.2f; fast mode, p10 %.1f vs %.1f µs = %.3f×; allocs/cycle %.1f vs %.1f)", sb.FairlockCyclesPerSec, sb.NaiveCyclesPerSec, sb.Ratio, sb.Slices, sb.SliceRatioMin, sb.SliceRatioMax, sb.FairlockP10us, sb.NaiveP10us, sb.P10Ratio, sb.FairlockAllocs, sb.NaiveAllocs), sb.Ratio >= 1.0)
			if fl != nil && naive != nil && naive.CyclesPerSec > 0 {
				// Noise: the standard error of each harness's ratio over its
				// turn pairs; they agree if they differ by at most twice that
				// of the difference.
				_, seBench, n := pairedRatio(fl.TurnRates, naive.TurnRates)
				seSide := 0.0
				if sb.Slices > 1 {
					seSide = sb.SliceRatioSD / math.Sqrt(float64(sb.Slices))
				}
				benchRatio := fl.CyclesPerSec / naive.CyclesPerSec
				diff, tol := math.Abs(benchRatio-sb.Ratio), 2*math.Hypot(seBench, seSide)
				add("Uncontended", "bench and side-by-side ratios agree within noise (they differ by ≤ 2σ of the difference, σ from their turn pairs)",
					fmt.Sprintf("%.3f vs %.3f: Δ %.3f, 2σ %.3f (bench %d turn pairs, side-by-side %d)", benchRatio, sb.Ratio, diff, tol, n, sb.Slices), diff <= tol)
				if fl.P10us > 0 && sb.P10Ratio > 0 {
					// The fast mode's ratio moves little between runs: a
					// harness that changed what a cycle costs would show here.
					p10 := naive.P10us / fl.P10us
					add("Uncontended", "bench and side-by-side agree in the fast mode: p10 ratios within 0.05",
						fmt.Sprintf("%.3f vs %.3f: Δ %.3f", p10, sb.P10Ratio, math.Abs(p10-sb.P10Ratio)), math.Abs(p10-sb.P10Ratio) <= 0.05)
				}
			}
		}
	}
	ts = append(ts, namesTargets(res)...)
	// contended, each variant
	for _, v := range contendedVariants(res) {
		f := findContended(res, "fairlock", v)
		if f == nil {
			continue
		}
		area := "Contended " + v
		var bs *ContendedResult // best spinner by grants/s
		var lowP99, lowCPU *ContendedResult
		for i := range res.Contended {
			c := &res.Contended[i]
			if c.Variant != v || !spinners[c.Peer] || c.GrantsTotal == 0 {
				continue
			}
			if bs == nil || c.GrantsPerSec > bs.GrantsPerSec {
				bs = c
			}
			if lowP99 == nil || c.WaitP99us < lowP99.WaitP99us {
				lowP99 = c
			}
			if lowCPU == nil || c.ServerCPUusPerGrant < lowCPU.ServerCPUusPerGrant {
				lowCPU = c
			}
		}
		if bs != nil {
			add(area, "grants/s ≥ 1.05× best spinning peer", fmt.Sprintf("%.0f vs %s %.0f = %.3f×", f.GrantsPerSec, bs.Peer, bs.GrantsPerSec, f.GrantsPerSec/bs.GrantsPerSec), f.GrantsPerSec >= 1.05*bs.GrantsPerSec)
		}
		if sh := findContended(res, "fairlock-shared", v); sh != nil && bs != nil && sh.GrantsPerSec > 0 {
			add(area, "one Locker shared by the workers: grants/s ≥ 0.98× best spinning peer",
				fmt.Sprintf("%.0f vs %s %.0f = %.3f×", sh.GrantsPerSec, bs.Peer, bs.GrantsPerSec, sh.GrantsPerSec/bs.GrantsPerSec), sh.GrantsPerSec >= 0.98*bs.GrantsPerSec)
		}
		if et := findContended(res, "etcd", v); et != nil && et.GrantsPerSec > 0 {
			add(area, "grants/s ≥ 4.5× etcd", fmt.Sprintf("%.0f vs %.0f = %.2f×", f.GrantsPerSec, et.GrantsPerSec, f.GrantsPerSec/et.GrantsPerSec), f.GrantsPerSec >= 4.5*et.GrantsPerSec)
		} else {
			ts = append(ts, Target{Area: area, Target: "grants/s ≥ 4.5× etcd", Value: "etcd did not run (install etcd-server)", NA: true})
		}
		add(area, "lock busy ≥ 90%", fmt.Sprintf("%.1f%%", 100*f.Busy), f.Busy >= 0.9)
		// Judged against the PING just before the run, as issue 4's target
		// was: one sampled during the run carries the run's own scheduling
		// delays (16 workers and Redis on two cores), which would excuse
		// the hand-off's. Both are shown, and the limit section's.
		pingNote := ""
		if f.RunPingus > 0 {
			pingNote += fmt.Sprintf("; PING sampled during the run %.0f µs = %.2f×", f.RunPingus, f.GapP50us/f.RunPingus)
		}
		if r := rtt(res); !math.IsNaN(r) {
			pingNote += fmt.Sprintf("; limit section's PING %.0f µs = %.2f×", r, f.GapP50us/r)
		}
		if r := f.LocalPingus; r > 0 {
			add(area, "hand-off gap p50 ≤ 1.3× PING", fmt.Sprintf("%.0f µs = %.2f× PING %.0f µs (measured just before%s)", f.GapP50us, f.GapP50us/r, r, pingNote), f.GapP50us <= 1.3*r)
		} else if r := rtt(res); !math.IsNaN(r) {
			add(area, "hand-off gap p50 ≤ 1.3× PING", fmt.Sprintf("%.0f µs = %.2f× PING %.0f µs (limit section%s)", f.GapP50us, f.GapP50us/r, r, pingNote), f.GapP50us <= 1.3*r)
		}
		if lowP99 != nil {
			add(area, "wait p99 ≤ 1/10 of best spinning peer", fmt.Sprintf("%.2f ms vs %s %.1f ms = 1/%.1f", f.WaitP99us/1e3, lowP99.Peer, lowP99.WaitP99us/1e3, lowP99.WaitP99us/f.WaitP99us), f.WaitP99us*10 <= lowP99.WaitP99us)
		}
		bound := 1.5 * float64(f.Workers) * (f.HoldMeanus + f.GapP50us)
		add(area, "max wait ≤ 1.5 × workers × (hold + hand-off)", fmt.Sprintf("%.2f ms vs bound %.2f ms (hold %.0f µs measured, hand-off = gap p50)", f.WaitMaxus/1e3, bound/1e3, f.HoldMeanus), f.WaitMaxus <= bound)
		add(area, "Jain's index ≥ 0.999", fmt.Sprintf("%.5f (min %d / max %d grants)", f.Jain, f.MinGrants, f.MaxGrants), f.Jain >= 0.999)
		add(area, "client round trips per grant ≤ 3", fmt.Sprintf("%.2f", f.RoundTripsPerGrant), f.RoundTripsPerGrant <= 3)
		if lowCPU != nil {
			add(area, "Redis CPU per grant ≤ best spinning peer", fmt.Sprintf("%.1f µs vs %s %.1f µs", f.ServerCPUusPerGrant, lowCPU.Peer, lowCPU.ServerCPUusPerGrant), f.ServerCPUusPerGrant <= lowCPU.ServerCPUusPerGrant)
		}
		add(area, "zero overlaps", fmt.Sprintf("%d (interval check), %d (in-process counter)", f.Overlaps, f.OverlapsAtomic), f.Overlaps == 0 && f.OverlapsAtomic == 0)
		add(area, "zero grants back to the releaser while others wait", fmt.Sprintf("%d", f.Barging), f.Barging == 0)
		if f.Errors > 0 || f.Note != "" {
			add(area, "no errors", fmt.Sprintf("%d errors %s", f.Errors, f.Note), false)
		}
	}
	// FIFO
	var ff, fe *FIFOResult
	for i := range res.FIFO {
		switch res.FIFO[i].Peer {
		case "fairlock":
			ff = &res.FIFO[i]
		case "etcd":
			if res.FIFO[i].Note == "" {
				fe = &res.FIFO[i]
			}
		}
	}
	if ff != nil {
		add("FIFO", "zero inversions", fmt.Sprintf("%d of %d pairs", ff.Inversions, ff.MaxInversions), ff.Inversions == 0 && ff.Note == "")
		if fe != nil {
			add("FIFO", "time per hand-off ≤ 1/2 of etcd's", fmt.Sprintf("%.0f µs vs etcd %.0f µs = %.2f×", ff.PerHandoffus, fe.PerHandoffus, ff.PerHandoffus/fe.PerHandoffus), ff.PerHandoffus*2 <= fe.PerHandoffus)
		}
	}
	// issue 9: no slower than an earlier run, within 50% (three runs of one
	// session spread 75-118 µs per FIFO hand-off on this machine)
	if b := res.Baseline; b != nil {
		if ff != nil && b.FIFOPerHandoffus > 0 {
			add("FIFO", "time per hand-off ≤ 1.5× the baseline's",
				fmt.Sprintf("%.0f µs vs %.0f µs on %s = %.2f×", ff.PerHandoffus, b.FIFOPerHandoffus, b.Date, ff.PerHandoffus/b.FIFOPerHandoffus), ff.PerHandoffus <= 1.5*b.FIFOPerHandoffus)
		}
		for _, s := range res.Scale {
			if s.Peer == "fairlock" && s.Names == 1 && s.Waiters == b.DrainWaiters && b.DrainPerGrantus > 0 {
				add("Scale", fmt.Sprintf("%d waiters: drain time per grant ≤ 1.5× the baseline's", s.Waiters),
					fmt.Sprintf("%.0f µs vs %.0f µs on %s = %.2f×", s.PerGrantus, b.DrainPerGrantus, b.Date, s.PerGrantus/b.DrainPerGrantus), s.PerGrantus <= 1.5*b.DrainPerGrantus)
			}
		}
	}
	// scale
	var s10, sBig *ScaleResult
	for i := range res.Scale {
		s := &res.Scale[i]
		if s.Peer != "fairlock" || s.Names != 1 {
			continue
		}
		if s10 == nil || s.Waiters < s10.Waiters {
			s10 = s
		}
		if sBig == nil || s.Waiters > sBig.Waiters {
			sBig = s
		}
	}
	if s10 != nil && sBig != nil && sBig != s10 {
		rt := sBig.RoundTripsPerGrant / s10.RoundTripsPerGrant
		cm := sBig.ServerCmdsPerGrant / s10.ServerCmdsPerGrant
		add("Scale", fmt.Sprintf("%d waiters: round trips per grant within 20%% of %d waiters", sBig.Waiters, s10.Waiters), fmt.Sprintf("%.2f vs %.2f = %.2f×", sBig.RoundTripsPerGrant, s10.RoundTripsPerGrant, rt), rt <= 1.2 && rt >= 0.8)
		add("Scale", fmt.Sprintf("%d waiters: Redis commands per grant within 20%% of %d waiters", sBig.Waiters, s10.Waiters), fmt.Sprintf("%.2f vs %.2f = %.2f×", sBig.ServerCmdsPerGrant, s10.ServerCmdsPerGrant, cm), cm <= 1.2 && cm >= 0.8)
	}
	for i := range res.Scale {
		s := &res.Scale[i]
		if s.Peer != "fairlock" || s.Waiters < 1000 {
			continue
		}
		add("Scale", fmt.Sprintf("%s: client heap < 4 KiB per waiter", s.Case), fmt.Sprintf("%.0f B", s.HeapPerWaiter), s.HeapPerWaiter < 4096)
		add("Scale", fmt.Sprintf("%s: client heap + goroutine stacks < 4 KiB per waiter", s.Case), fmt.Sprintf("%.0f B (stack %.0f B: the caller's goroutine blocked in Acquire)", s.HeapStackPerWaiter, s.HeapStackPerWaiter-s.HeapPerWaiter), s.HeapStackPerWaiter < 4096)
		add("Scale", fmt.Sprintf("%s: pub/sub connections 1 per Locker", s.Case), fmt.Sprintf("%d for %d Lockers (waiters', holders', and a probe that never waits), %d waiters", s.PubsubConns, s.Lockers, s.Waiters), s.PubsubConns <= s.Lockers)
		if s.Granted != s.Waiters*max(s.Rounds, 1) || s.Note != "" {
			add("Scale", s.Case+": every waiter granted", fmt.Sprintf("%d of %d %s", s.Granted, s.Waiters, s.Note), false)
		}
	}
	ts = append(ts, idleTargets(res)...)
	return append(ts, kindTargets(res)...)
}

// idleTargets are the scale row's idle targets: one Locker holding 10,000
// leases, and 10,000 waiters on one name, while nothing happens.
func idleTargets(res *Results) []Target {
	var ts []Target
	add := func(area, target, value string, met bool) {
		ts = append(ts, Target{Area: area, Target: target, Value: value, Met: met})
	}
	base := ""
	for _, r := range res.Idle {
		if r.Case == "none" {
			base = fmt.Sprintf("; Redis alone: %.2f%%, %.1f cmds/s", r.CPUPct, r.CmdsPerS)
		}
	}
	for _, r := range res.Idle {
		if r.Peer != "fairlock" || r.Count != 10000 {
			continue
		}
		area := "Scale, idle"
		detail := fmt.Sprintf(" (window %.1f s, heartbeat %s%s)", r.WindowS, r.Heartbeat, base)
		switch {
		case r.Note != "":
			add(area, fmt.Sprintf("10000 %s: no errors", r.Case), r.Note, false)
		case r.Case == "leases":
			add(area, "one Locker holding 10000 leases: Redis CPU ≤ 1% of a core", fmt.Sprintf("%.2f%%%s", r.CPUPct, detail), r.CPUPct <= 1)
			add(area, "one Locker holding 10000 leases: ≤ 1000 Redis commands/s", fmt.Sprintf("%.1f/s%s", r.CmdsPerS, detail), r.CmdsPerS <= 1000)
		case r.Case == "waiters":
			add(area, "10000 waiters on one name: Redis CPU ≤ 2% of a core", fmt.Sprintf("%.2f%% (%.1f cmds/s)%s", r.CPUPct, r.CmdsPerS, detail), r.CPUPct <= 2)
		}
	}
	return ts
}

// callLines writes a row's per-command counts per grant: Redis's, the
// client's and the SLOWLOG.
func callLines(b *strings.Builder, peer string, d runDetail, grants int) {
	if len(d.ClientCalls) == 0 {
		return
	}
	if len(d.Cmdstats) > 0 {
		fmt.Fprintf(b, "- %s Redis commands: %s\n", peer, cmdstatsLine(d.Cmdstats, grants))
		fmt.Fprintf(b, "  - %s client calls: %s\n", peer, cmdstatsLine(d.ClientCalls, grants))
		fmt.Fprintf(b, "  - %s SLOWLOG: %s; server time per EVALSHA %.1f µs\n", peer, slowLine(d.Slowlog), d.EvalUsec)
	} else {
		fmt.Fprintf(b, "- %s client calls: %s\n", peer, cmdstatsLine(d.ClientCalls, grants))
	}
}

func writeAll(dir string, res *Results) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	must(os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644))
	must(os.WriteFile(filepath.Join(dir, "results.md"), []byte(markdown(res)), 0o644))
	must(os.WriteFile(filepath.Join(dir, "chart.svg"), []byte(chart(res)), 0o644))
	// A plot that cannot be drawn costs the run nothing else: its figures
	// are in results.json, and -report-only redraws it.
	if err := drawPlots(dir, res); err != nil {
		log.Printf("plots: %v", err)
	}
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

func markdown(res *Results) string {
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	m := res.Meta
	p("# fairlock benchmark results\n\n")
	p("- Date: %s; run took %.0f s\n", m.Date, m.ElapsedS)
	p("- Machine: `nproc` = %d, CPU %s, load average at start %s (shared with other jobs)\n", m.Nproc, m.CPU, m.LoadAvg)
	p("- %s, redis-server %s, etcd %s; lease/expiry %s for every peer, spinners retry every %s\n", m.GoVersion, m.RedisVersion, orNA(m.EtcdVersion), m.LeaseTTL, m.Spin)
	p("- Every latency is also given as a multiple (×) of the go-redis PING round trip p50, measured over 200 ms right before that row's run (the load of this shared machine changes from minute to minute); the limit section has the long measurement. Ratios `fl÷peer` are fairlock's figure divided by the peer's.\n\n")
	if l := res.Limit; l != nil {
		p("## 5. The limit (one connection)\n\n| PING p50 | PING p99 | PING/s | PING p50 after 1 ms idle | EVALSHA p50 | EVALSHA/s | EVALSHA/s pipelined ×%d | PUBLISH → subscriber goroutine p50 | p99 |\n|---|---|---|---|---|---|---|---|---|\n", l.PipelineDepth)
		p("| %.0f µs | %.0f µs | %.0f | %.0f µs%s | %.0f µs%s | %.0f | %.0f | %.0f µs%s | %.0f µs%s |\n\n", l.PingP50us, l.PingP99us, l.PingOpsPerSec, l.PingColdP50us, xr(res, l.PingColdP50us), l.EvalshaP50us, xr(res, l.EvalshaP50us), l.EvalshaOpsPerSec, l.EvalshaPipelined, l.NotifyP50us, xr(res, l.NotifyP50us), l.NotifyP99us, xr(res, l.NotifyP99us))
		p("The last two columns are the floor of any pub/sub hand-off on this machine: from a PUBLISH call to a goroutine woken by the subscriber's reader, the path of a grant message.\n\n")
	}
	if len(res.Uncontended) > 0 {
		var fl float64
		for _, u := range res.Uncontended {
			if u.Peer == "fairlock" {
				fl = u.CyclesPerSec
			}
		}
		ctxText := "a fresh context with a deadline for each call, cancelled when it returns (as a plain loop passes them)"
		if res.Uncontended[0].Context == "" {
			ctxText = "one context with a deadline for each turn (a run from before the fresh contexts)"
		}
		p("## 1. Uncontended acquire+release, one client per peer (go-redis PoolSize %s), %s, unless the note says otherwise; the peers take turns (-uncontended-rounds), so drift in the machine's load falls on all alike\n\n| peer | cycles/s | fl÷peer | p10 | p50 | p99 | turns: cycles/s min–max | round trips/cycle | Redis cmds/cycle | server CPU/cycle | note |\n|---|---|---|---|---|---|---|---|---|---|---|\n", poolName(res.Uncontended[0].PoolSize), ctxText)
		for _, u := range res.Uncontended {
			lo, hi := minMax(u.TurnRates)
			p("| %s | %.0f | %s | %.1f µs | %.0f µs%s | %.0f µs%s | %.0f–%.0f | %s | %s | %.1f µs | %s |\n", u.Peer, u.CyclesPerSec, ratio(fl, u.CyclesPerSec), u.P10us, u.P50us, xl(res, u.LocalPingus, u.P50us), u.P99us, xl(res, u.LocalPingus, u.P99us), lo, hi, rtCell(u.Peer, u.RoundTripsPerCycle), redisOnly(u.Peer, u.ServerCmdsPerCycle), u.ServerCPUusPerCycle, u.Note)
		}
		p("\nOn this VM a cycle runs in one of two modes whose mix moves from second to second: CPU-bound (PING ≈ 8 µs, where the locks' costs show) and bound by the wake-up of the other vCPU (PING ≈ 60 µs, where every peer takes about 2 PINGs a cycle and the ratios fall near 1). p10 is the fast mode alone; the PING before each row is in the × figures.\n")
		p("\n")
		for _, u := range res.Uncontended {
			if len(u.Cmdstats) > 0 {
				p("- %s Redis commands per cycle (µs per call): %s\n", u.Peer, perCycleLine(u.Cmdstats, u.UsecPer))
			}
		}
		p("\n")
	}
	if sb := res.SideBySide; sb != nil {
		p("### The plain loop: BenchmarkSideBySide (../fairlock/sidebyside_test.go), run right after\n\n")
		if sb.Ratio == 0 {
			p("Did not run: %s\n\n", sb.Note)
		} else {
			p("naive and fairlock in one process, on a redis-server of its own, taking turns in slices of 300 ms; each on its own client with PoolSize 1, a fresh context.WithTimeout per call.\n\n")
			p("| peer | cycles/s | p10 | p50 | allocs/cycle | B/cycle | Redis CPU/cycle |\n|---|---|---|---|---|---|---|\n")
			p("| naive | %.0f | %.1f µs | %.1f µs | %.1f | %.0f | %.1f µs |\n| fairlock | %.0f | %.1f µs | %.1f µs | %.1f | %.0f | %.1f µs |\n\n", sb.NaiveCyclesPerSec, sb.NaiveP10us, sb.NaiveP50us, sb.NaiveAllocs, sb.NaiveBytes, sb.NaiveRedisus, sb.FairlockCyclesPerSec, sb.FairlockP10us, sb.FairlockP50us, sb.FairlockAllocs, sb.FairlockBytes, sb.FairlockRedisus)
			p("fairlock/naive %.3f over %d slice pairs (per pair: min %.2f, median %.2f, max %.2f, sd %.3f); in the fast mode (p10) %.3f. Command: `%s`\n\n", sb.Ratio, sb.Slices, sb.SliceRatioMin, sb.SliceRatioMedian, sb.SliceRatioMax, sb.SliceRatioSD, sb.P10Ratio, sb.Command)
			if sb.FloorOverNaive > 0 {
				p("The two round-trip regimes apart (median pair ratio where naive's slice ran in its faster half of slices / its slower half): %.3f / %.3f. The floor (fairlock's commands from the same loop, none of its Go code): floor/naive %.3f, fairlock/floor %.3f; Redis CPU/cycle %.1f µs.\n\n", sb.FastHalfRatio, sb.SlowHalfRatio, sb.FloorOverNaive, sb.FairlockOverFloor, sb.FloorRedisus)
			}
		}
	}
	namesTables(&b, res)
	for _, v := range contendedVariants(res) {
		var f *ContendedResult
		for i := range res.Contended {
			if res.Contended[i].Variant == v && res.Contended[i].Peer == "fairlock" {
				f = &res.Contended[i]
			}
		}
		var any ContendedResult
		for _, c := range res.Contended {
			if c.Variant == v {
				any = c
				break
			}
		}
		p("## 2. Contended: %d workers (%d process(es) × %d), one name, hold %.0f ms, %.0f s\n\n", any.Workers, any.Procs, any.Workers/max(any.Procs, 1), any.HoldMs, any.DurationS)
		p("| peer | grants/s | fl÷peer | busy | Jain (min/max) | back to releaser | wait p50 | wait p99 | wait max | hand-off gap p50 | gap p99 | gap max (>5 ms) | RT/grant | Redis cmds/grant | server CPU/grant | overlaps | PING p50 before / during | errors |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, c := range res.Contended {
			if c.Variant != v {
				continue
			}
			fr := ""
			if f != nil {
				fr = ratio(f.GrantsPerSec, c.GrantsPerSec)
			}
			errs := fmt.Sprint(c.Errors)
			if c.Note != "" {
				errs += " " + c.Note
			}
			p("| %s | %.0f | %s | %.1f%% | %.4f (%d/%d) | %.1f%% | %.2f ms%s | %.2f ms%s | %.1f ms%s | %.0f µs%s | %.0f µs%s | %.1f ms (%d) | %s | %s | %.1f µs | %d | %.0f / %.0f µs | %s |\n",
				c.Peer, c.GrantsPerSec, fr, 100*c.Busy, c.Jain, c.MinGrants, c.MaxGrants, c.BargingPct,
				c.WaitP50us/1e3, xl(res, c.LocalPingus, c.WaitP50us), c.WaitP99us/1e3, xl(res, c.LocalPingus, c.WaitP99us), c.WaitMaxus/1e3, xl(res, c.LocalPingus, c.WaitMaxus),
				c.GapP50us, xl(res, c.LocalPingus, c.GapP50us), c.GapP99us, xl(res, c.LocalPingus, c.GapP99us), c.GapMaxus/1e3, c.GapsOver5ms,
				rtCell(c.Peer, c.RoundTripsPerGrant), redisOnly(c.Peer, c.ServerCmdsPerGrant), c.ServerCPUusPerGrant, c.Overlaps+c.OverlapsAtomic, c.LocalPingus, c.RunPingus, errs)
		}
		p("\n")
		for _, c := range res.Contended {
			if c.Variant == v {
				callLines(&b, c.Peer, c.runDetail, c.GrantsTotal)
			}
		}
		p("\n")
	}
	if len(res.FIFO) > 0 {
		var fl float64
		for _, f := range res.FIFO {
			if f.Peer == "fairlock" {
				fl = f.PerHandoffus
			}
		}
		f0 := res.FIFO[0]
		p("## 3. FIFO: %d waiters arrive %.0f ms apart while the lock is held, %d rounds\n\n| peer | inversions | time per hand-off | fl÷peer | drain (mean/round) | hand-off gap p50 | note |\n|---|---|---|---|---|---|---|\n", f0.Waiters, f0.SpacingMs, f0.Rounds)
		for _, f := range res.FIFO {
			p("| %s | %d of %d | %.0f µs%s | %s | %.1f ms | %.0f µs%s | %s |\n", f.Peer, f.Inversions, f.MaxInversions, f.PerHandoffus, xl(res, f.LocalPingus, f.PerHandoffus), ratio(fl, f.PerHandoffus), f.DrainMs, f.GapP50us, xl(res, f.LocalPingus, f.GapP50us), f.Note)
		}
		p("\n")
	}
	if len(res.Scale) > 0 {
		p("## 4. Scale: waiters in one process (for fairlock: one Locker for all waiters, one for the holders, one uncounted probe that polls Inspect)\n\n| peer | names × waiters | enqueue | drain | per grant | RT/grant (all) | RT/grant (drain only) | Redis cmds/grant (all) | cmds/grant (drain only) | client B/waiter heap+stack (heap) | pub/sub conns | conns dialled | used_memory at peak (B/waiter) | note |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, s := range res.Scale {
			p("| %s | %s | %.0f ms | %.0f ms | %.0f µs%s | %.2f | %.2f | %.2f | %.2f | %s | %d | %d | %.1f MiB (%.0f) | %s |\n", s.Peer, s.Case, s.EnqueueMs, s.DrainMs, s.PerGrantus, xl(res, s.LocalPingus, s.PerGrantus), s.RoundTripsPerGrant, s.DrainRTPerGrant, s.ServerCmdsPerGrant, s.DrainCmdsPerGrant, memCell(s), s.PubsubConns, s.Dials, float64(s.UsedMemoryPeak)/(1<<20), s.UsedMemoryPerWaiter, s.Note)
		}
		p("\n")
		for _, s := range res.Scale {
			callLines(&b, s.Peer+" "+s.Case, s.runDetail, s.Granted)
		}
		p("\n")
	}
	if len(res.Idle) > 0 {
		p("## 4b. Scale, idle: leases held by one Locker (one name each) and waiters of one Locker on one name (behind another client's lease), kept while nothing is acquired or released; measured over a window after the setup and a settling wait\n\n")
		p("| peer | case | count | heartbeat | setup | window | Redis cmds/s | Redis CPU (%% of a core) | client RT/s | Redis used_memory per one | client heap per one | client stack per one | Redis commands/s | note |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range res.Idle {
			p("| %s | %s | %d | %s | %.0f ms | %.1f s | %.1f | %.3f%% | %.1f | %.0f B | %.0f B | %.0f B | %s | %s |\n", r.Peer, r.Case, r.Count, orNA(r.Heartbeat), r.SetupMs, r.WindowS, r.CmdsPerS, r.CPUPct, r.RTPerS, r.MemPer, r.HeapPer, r.StackPer, perSecLine(r.Cmdstats), r.Note)
		}
		p("\nThe \"none\" row is Redis with no client: its own background work, in every other row too. A waiters row includes the holder's upkeep (one lease). Memory per one is the delta over the setup divided by the count; the client's stack is the waiting goroutines' (one per waiter).\n\n")
	}
	kindTables(&b, res)
	if len(res.Targets) > 0 {
		met, na := tally(res.Targets)
		p("## Targets (issues 4, 9, 10, the fair-lock issue's and fair share's): %d of %d met", met, len(res.Targets)-na)
		if na > 0 {
			p(", %d not evaluated", na)
		}
		p("\n\n| area | target | fairlock | met |\n|---|---|---|---|\n")
		for _, t := range res.Targets {
			mark := "**missed**"
			switch {
			case t.NA:
				mark = "n/a"
			case t.Met:
				mark = "met"
			}
			p("| %s | %s | %s | %s |\n", t.Area, t.Target, t.Value, mark)
		}
		p("\n")
	}
	p("## Peer settings\n\n")
	for _, s := range m.Settings {
		p("- %s\n", s)
	}
	p("\n![chart](chart.svg)\n\nCommand: `bench/run.sh %s`\n", strings.Join(m.Args, " "))
	return b.String()
}

// mostFirst is per's commands, most frequent first, then by name.
func mostFirst(per map[string]float64) []string {
	keys := make([]string, 0, len(per))
	for k := range per {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return per[keys[i]] > per[keys[j]] || per[keys[i]] == per[keys[j]] && keys[i] < keys[j]
	})
	return keys
}

// perCycleLine lists commands per cycle and Redis's µs per call of each,
// most frequent first.
func perCycleLine(per, usec map[string]float64) string {
	var parts []string
	for _, k := range mostFirst(per) {
		if per[k] < 0.01 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.2f (%.2f µs)", k, per[k], usec[k]))
	}
	return strings.Join(parts, ", ")
}

// perSecLine lists commands per second, most frequent first, the top 6.
func perSecLine(per map[string]float64) string {
	var parts []string
	for i, k := range mostFirst(per) {
		if i == 6 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.1f", k, per[k]))
	}
	return strings.Join(parts, ", ")
}

// fastMode compares the p10 cycles of two uncontended rows: the fast mode
// of this VM alone (see UncontendedResult.P10us).
func fastMode(u, naive *UncontendedResult) string {
	if u.P10us == 0 || naive.P10us == 0 {
		return ""
	}
	return fmt.Sprintf("; fast mode, p10 %.1f vs %.1f µs = %.3f×", u.P10us, naive.P10us, naive.P10us/u.P10us)
}

func minMax(xs []float64) (lo, hi float64) {
	for i, x := range xs {
		if i == 0 || x < lo {
			lo = x
		}
		if i == 0 || x > hi {
			hi = x
		}
	}
	return lo, hi
}

func poolName(n int) string {
	if n == 0 {
		return "default"
	}
	return fmt.Sprint(n)
}

func orNA(s string) string {
	if s == "" {
		return "n/a"
	}
	return s
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f", a/b)
}

func redisOnly(peer string, v float64) string {
	if peer == "etcd" {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", v)
}

func cmdstatsLine(m map[string]int64, grants int) string {
	type kv struct {
		k string
		v int64
	}
	var l []kv
	for k, v := range m {
		l = append(l, kv{k, v})
	}
	sort.Slice(l, func(i, j int) bool { return l[i].v > l[j].v || l[i].v == l[j].v && l[i].k < l[j].k })
	var parts []string
	for i, x := range l {
		if i == 8 {
			break
		}
		if grants > 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f/grant", x.k, float64(x.v)/float64(grants)))
		} else {
			parts = append(parts, fmt.Sprintf("%s %d", x.k, x.v))
		}
	}
	return strings.Join(parts, ", ")
}

// chart draws four bar panels: for the in-process contended scenario
// grants/s, hand-off gap p50 and fairness (Jain's index, % of grants back to
// the releaser), and the FIFO scenario's inversions.
func chart(res *Results) string {
	cs := firstVariant(res)
	fifo := map[string]FIFOResult{}
	for _, f := range res.FIFO {
		fifo[f.Peer] = f
	}
	const (
		rowH   = 34
		top    = 74
		labelW = 90
		panelW = 290
		gapW   = 24
	)
	W := labelW + 4*(panelW+gapW)
	H := top + rowH*len(cs) + 64
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", W, H, W, H)
	p(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	title := "fairlock and peers"
	if len(cs) > 0 {
		title = fmt.Sprintf("%d workers on one name, hold %.0f ms, %.0f s each", cs[0].Workers, cs[0].HoldMs, cs[0].DurationS)
		if len(res.FIFO) > 0 {
			title += fmt.Sprintf("; FIFO: %d waiters %.0f ms apart", res.FIFO[0].Waiters, res.FIFO[0].SpacingMs)
		}
		title += fmt.Sprintf(" (%s, %d CPUs, shared)", res.Meta.Date, res.Meta.Nproc)
	}
	p(`<text x="10" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", html.EscapeString(title))
	r := rtt(res)
	type panel struct {
		title string
		val   func(c ContendedResult) float64
		label func(c ContendedResult) string
		lo    float64 // axis start; bars are (v-lo)/(max-lo)
		hi    float64 // 0: the largest value
		color func(c ContendedResult) string
	}
	peerColor := func(c ContendedResult) string {
		if c.Peer == "fairlock" {
			return "#6aaee0"
		}
		return "#c8c8c8"
	}
	fairColor := func(c ContendedResult) string {
		switch {
		case c.Jain >= 0.999 && c.Barging == 0:
			return "#7cc487"
		case c.Jain >= 0.98:
			return "#efc46a"
		default:
			return "#e08080"
		}
	}
	panels := []panel{
		{"grants/s (higher is better)", func(c ContendedResult) float64 { return c.GrantsPerSec }, func(c ContendedResult) string { return fmt.Sprintf("%.0f", c.GrantsPerSec) }, 0, 0, peerColor},
		{"hand-off gap p50 (lower is better)", func(c ContendedResult) float64 { return c.GapP50us }, func(c ContendedResult) string {
			rr := c.LocalPingus
			if rr == 0 {
				rr = r
			}
			if math.IsNaN(rr) {
				return fmt.Sprintf("%.0f µs", c.GapP50us)
			}
			return fmt.Sprintf("%.0f µs = %.1f× PING", c.GapP50us, c.GapP50us/rr)
		}, 0, 0, peerColor},
		{"fairness: Jain's index, axis 0.95–1", func(c ContendedResult) float64 { return c.Jain }, func(c ContendedResult) string {
			return fmt.Sprintf("%.4f; %.0f%% back to releaser", c.Jain, c.BargingPct)
		}, 0.95, 1, fairColor},
		{"FIFO: inversions (lower is better)", func(c ContendedResult) float64 { return float64(fifo[c.Peer].Inversions) }, func(c ContendedResult) string {
			f, ok := fifo[c.Peer]
			if !ok {
				return "not run"
			}
			return fmt.Sprintf("%d of %d pairs", f.Inversions, f.MaxInversions)
		}, 0, 0, func(c ContendedResult) string {
			if f, ok := fifo[c.Peer]; ok && f.Inversions == 0 {
				return "#7cc487"
			}
			return "#e08080"
		}},
	}
	for pi, pn := range panels {
		x0 := labelW + pi*(panelW+gapW)
		p(`<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", x0, top-20, html.EscapeString(pn.title))
		hi := pn.hi
		if hi == 0 {
			for _, c := range cs {
				hi = math.Max(hi, pn.val(c))
			}
		}
		if hi <= pn.lo {
			hi = pn.lo + 1
		}
		barMax := float64(panelW - 10)
		p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#444"/>`+"\n", x0, top-6, x0, top+rowH*len(cs))
		for i, c := range cs {
			y := top + i*rowH
			if pi == 0 {
				p(`<text x="%d" y="%d" text-anchor="end" font-weight="%s">%s</text>`+"\n", labelW-8, y+rowH/2+4, map[bool]string{true: "bold", false: "normal"}[c.Peer == "fairlock"], c.Peer)
			}
			w := (pn.val(c) - pn.lo) / (hi - pn.lo) * barMax
			w = math.Max(1, math.Min(w, barMax))
			p(`<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", x0, y+4, w, rowH-10, pn.color(c))
			p(`<text x="%d" y="%d">%s</text>`+"\n", x0+4, y+rowH/2+4, html.EscapeString(pn.label(c)))
		}
	}
	p(`<text x="10" y="%d" font-size="11" fill="#444">Blue: fairlock. Fairness colour: green = Jain ≥ 0.999 and no grant back to the releaser while others wait; amber ≥ 0.98; red below.</text>`+"\n", H-34)
	p(`<text x="10" y="%d" font-size="11" fill="#444">Hand-off gap: from the start of a release to the next grant, on one monotonic clock; PING = go-redis PING round trip p50 just before each run (limit section: %.0f µs). Source: results.json.</text>`+"\n", H-18, r)
	p("</svg>\n")
	return b.String()
}

// firstVariant are the contended rows of the first variant run: the
// contended scenario's (16 workers in this process) when it ran.
func firstVariant(res *Results) []ContendedResult {
	var cs []ContendedResult
	for _, c := range res.Contended {
		if c.Variant == res.Contended[0].Variant {
			cs = append(cs, c)
		}
	}
	return cs
}

func slowLine(s []SlowEntry) string {
	if len(s) == 0 {
		return "none ≥ 1 ms"
	}
	var parts []string
	for _, e := range s {
		parts = append(parts, fmt.Sprintf("%.1f ms %s", float64(e.Us)/1e3, e.Cmd))
	}
	return strings.Join(parts, "; ")
}

// memCell shows client memory per waiter only where it is more than noise.
func memCell(s ScaleResult) string {
	if s.Waiters < 1000 {
		return "— (too few to measure)"
	}
	return fmt.Sprintf("%.0f (%.0f)", s.HeapStackPerWaiter, s.HeapPerWaiter)
}

// rtCell shows round trips; etcd's are its unary gRPC calls.
func rtCell(peer string, v float64) string {
	if peer == "etcd" {
		return fmt.Sprintf("%.2f (gRPC unary)", v)
	}
	return fmt.Sprintf("%.2f", v)
}
