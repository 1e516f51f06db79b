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
	// naive spin lock, for both kinds of context
	var naive *UncontendedResult
	best, bestName := 0.0, ""
	for i := range res.Uncontended {
		u := &res.Uncontended[i]
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
		if variant == "" {
			variant = " (deadline ctx)"
		}
		if best > 0 {
			add("Uncontended", "cycles/s ≥ 0.9× fastest peer"+variant,
				fmt.Sprintf("%.0f vs %s %.0f = %.2f×", u.CyclesPerSec, bestName, best, u.CyclesPerSec/best), u.CyclesPerSec >= 0.9*best)
		}
		if naive != nil && naive.CyclesPerSec > 0 {
			add("Uncontended", "cycles/s ≥ 0.9× naive"+variant,
				fmt.Sprintf("%.0f vs %.0f = %.2f×", u.CyclesPerSec, naive.CyclesPerSec, u.CyclesPerSec/naive.CyclesPerSec), u.CyclesPerSec >= 0.9*naive.CyclesPerSec)
			if naive.ServerCPUusPerCycle > 0 {
				add("Uncontended", "Redis CPU per cycle ≤ 1.2× naive"+variant,
					fmt.Sprintf("%.1f µs vs %.1f µs = %.2f×", u.ServerCPUusPerCycle, naive.ServerCPUusPerCycle, u.ServerCPUusPerCycle/naive.ServerCPUusPerCycle), u.ServerCPUusPerCycle <= 1.2*naive.ServerCPUusPerCycle)
			}
		}
	}
	// contended, each variant
	variants := []string{}
	seen := map[string]bool{}
	for _, c := range res.Contended {
		if !seen[c.Variant] {
			seen[c.Variant] = true
			variants = append(variants, c.Variant)
		}
	}
	for _, v := range variants {
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
			add(area, "grants/s ≥ 1.0× best spinning peer", fmt.Sprintf("%.0f vs %s %.0f = %.2f×", f.GrantsPerSec, bs.Peer, bs.GrantsPerSec, f.GrantsPerSec/bs.GrantsPerSec), f.GrantsPerSec >= bs.GrantsPerSec)
		}
		if et := findContended(res, "etcd", v); et != nil && et.GrantsPerSec > 0 {
			add(area, "grants/s ≥ 4× etcd", fmt.Sprintf("%.0f vs %.0f = %.1f×", f.GrantsPerSec, et.GrantsPerSec, f.GrantsPerSec/et.GrantsPerSec), f.GrantsPerSec >= 4*et.GrantsPerSec)
		}
		add(area, "lock busy ≥ 90%", fmt.Sprintf("%.1f%%", 100*f.Busy), f.Busy >= 0.9)
		if r := f.LocalPingus; r > 0 {
			add(area, "hand-off gap p50 ≤ 2× PING", fmt.Sprintf("%.0f µs = %.2f× PING %.0f µs (measured just before; limit section: %.0f µs)", f.GapP50us, f.GapP50us/r, r, rtt(res)), f.GapP50us <= 2*r)
		} else if r := rtt(res); !math.IsNaN(r) {
			add(area, "hand-off gap p50 ≤ 2× PING", fmt.Sprintf("%.0f µs = %.2f× PING %.0f µs", f.GapP50us, f.GapP50us/r, r), f.GapP50us <= 2*r)
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
	return append(ts, kindTargets(res)...)
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
		p("## 1. Uncontended acquire+release, one client per peer, a context with a deadline (as callers pass) unless the note says otherwise; the peers take turns (-uncontended-rounds), so drift in the machine's load falls on all alike\n\n| peer | cycles/s | fl÷peer | p50 | p99 | round trips/cycle | Redis cmds/cycle | server CPU/cycle | note |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, u := range res.Uncontended {
			p("| %s | %.0f | %s | %.0f µs%s | %.0f µs%s | %s | %s | %.1f µs | %s |\n", u.Peer, u.CyclesPerSec, ratio(fl, u.CyclesPerSec), u.P50us, xl(res, u.LocalPingus, u.P50us), u.P99us, xl(res, u.LocalPingus, u.P99us), rtCell(u.Peer, u.RoundTripsPerCycle), redisOnly(u.Peer, u.ServerCmdsPerCycle), u.ServerCPUusPerCycle, u.Note)
		}
		p("\n")
	}
	vs := []string{}
	seen := map[string]bool{}
	for _, c := range res.Contended {
		if !seen[c.Variant] {
			seen[c.Variant] = true
			vs = append(vs, c.Variant)
		}
	}
	for _, v := range vs {
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
		p("| peer | grants/s | fl÷peer | busy | Jain (min/max) | back to releaser | wait p50 | wait p99 | wait max | hand-off gap p50 | gap p99 | gap max (>5 ms) | RT/grant | Redis cmds/grant | server CPU/grant | overlaps | PING p50 before | errors |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
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
			p("| %s | %.0f | %s | %.1f%% | %.4f (%d/%d) | %.1f%% | %.2f ms%s | %.2f ms%s | %.1f ms%s | %.0f µs%s | %.0f µs%s | %.1f ms (%d) | %s | %s | %.1f µs | %d | %.0f µs | %s |\n",
				c.Peer, c.GrantsPerSec, fr, 100*c.Busy, c.Jain, c.MinGrants, c.MaxGrants, c.BargingPct,
				c.WaitP50us/1e3, xl(res, c.LocalPingus, c.WaitP50us), c.WaitP99us/1e3, xl(res, c.LocalPingus, c.WaitP99us), c.WaitMaxus/1e3, xl(res, c.LocalPingus, c.WaitMaxus),
				c.GapP50us, xl(res, c.LocalPingus, c.GapP50us), c.GapP99us, xl(res, c.LocalPingus, c.GapP99us), c.GapMaxus/1e3, c.GapsOver5ms,
				rtCell(c.Peer, c.RoundTripsPerGrant), redisOnly(c.Peer, c.ServerCmdsPerGrant), c.ServerCPUusPerGrant, c.Overlaps+c.OverlapsAtomic, c.LocalPingus, errs)
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
	kindTables(&b, res)
	if len(res.Targets) > 0 {
		met := 0
		for _, t := range res.Targets {
			if t.Met {
				met++
			}
		}
		p("## Targets (issues 4, 9 and 10): %d of %d met\n\n| area | target | fairlock | met |\n|---|---|---|---|\n", met, len(res.Targets))
		for _, t := range res.Targets {
			mark := "**missed**"
			if t.Met {
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
	var cs []ContendedResult
	variant := ""
	for _, c := range res.Contended {
		if variant == "" {
			variant = c.Variant
		}
		if c.Variant == variant {
			cs = append(cs, c)
		}
	}
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
