package main

import (
	"fmt"
	"math"
	"strings"
)

// tenantLayout is "A 13, B 1, ..." of a tenants row.
func tenantLayout(r KindResult) string {
	var parts []string
	for _, t := range r.Tenants {
		parts = append(parts, fmt.Sprintf("%s %d", t.Name, t.Workers))
	}
	return strings.Join(parts, ", ")
}

// tenantWeights is "1:2:3:4" of a weighted tenants row.
func tenantWeights(r KindResult) string {
	var parts []string
	for _, t := range r.Tenants {
		parts = append(parts, fmt.Sprint(max(t.Weight, 1)))
	}
	return strings.Join(parts, ":")
}

// tenantTable prints the rows of a tenants table, one line per tenant with
// its row's peer and totals on the first; column is the tenant's figure
// after its name (its workers, or its weight).
func tenantTable(p func(string, ...any), res *Results, rows []KindResult, column func(TenantFigures) int) {
	for _, r := range rows {
		for i, t := range r.Tenants {
			row, total, inUse := "", "", ""
			if i == 0 {
				row, total, inUse = r.Peer, fmt.Sprintf("%.0f", r.GrantsPerSec), fmt.Sprintf("%.1f%%", 100*r.InUse)
			}
			p("| %s | %s | %s | %s | %d | %.0f | %.1f%% | %.3f | %.2f ms%s | %.2f ms%s |\n", row, total, inUse, t.Name, column(t), t.GrantsPerSec, 100*t.Share,
				t.Share/math.Max(t.FairShare, 1e-9), t.WaitP50us/1e3, xl(res, r.LocalPingus, t.WaitP50us), t.WaitP99us/1e3, xl(res, r.LocalPingus, t.WaitP99us))
		}
	}
}

// kindRow returns the row of peer that ran (made grants), or nil.
func kindRow(rows []KindResult, peer string) *KindResult {
	for i := range rows {
		if rows[i].Peer == peer && rows[i].GrantsTotal > 0 {
			return &rows[i]
		}
	}
	return nil
}

// ranRow is the first row that made grants, else the first: the one whose
// settings head a table.
func ranRow(rows []KindResult) KindResult {
	for _, r := range rows {
		if r.GrantsTotal > 0 {
			return r
		}
	}
	return rows[0]
}

// spinnerRow returns the spinning baseline that ran: the fastest peer
// other than fairlock, or nil.
func spinnerRow(rows []KindResult) *KindResult {
	var best *KindResult
	for i := range rows {
		r := &rows[i]
		if r.Peer != "fairlock" && r.GrantsTotal > 0 && (best == nil || r.GrantsPerSec > best.GrantsPerSec) {
			best = r
		}
	}
	return best
}

// errCell is a kind row's errors cell: the count, and its note if any.
func errCell(r KindResult) string {
	if r.Note != "" {
		return fmt.Sprintf("%d %s", r.Errors, r.Note)
	}
	return fmt.Sprint(r.Errors)
}

// kindTables writes the semaphore, read-write lock and semaphore drain
// sections.
func kindTables(b *strings.Builder, res *Results) {
	p := func(f string, a ...any) { fmt.Fprintf(b, f, a...) }
	clients := func(r KindResult) string { return fmt.Sprintf("%d (%d)", r.Clients, r.Conns) }
	order := func(r KindResult) string {
		return fmt.Sprintf("%d of %d (by %s)", r.OrderBroken, r.OrderChecked, r.OrderBy)
	}
	if rows := res.Semaphore; len(rows) > 0 {
		var fl float64
		if f := kindRow(rows, "fairlock"); f != nil {
			fl = f.GrantsPerSec
		}
		r0 := ranRow(rows)
		p("## 6. Semaphore: capacity %d, %d workers, each on its own client, one name, 1 permit per request, hold %.0f ms, %.0f s\n\n", r0.Capacity, r0.Workers, r0.HoldMs, r0.DurationS)
		p("| peer | clients (conns dialled) | grants/s | fl÷peer | permits in use | Jain (min/max) | wait p50 | wait p99 | wait max | over capacity | broke FIFO order (of checkable) | RT/grant | Redis cmds/grant | server CPU/grant | PING p50 before | errors |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range rows {
			p("| %s | %s | %.0f | %s | %.1f%% | %.4f (%d/%d) | %.2f ms%s | %.2f ms%s | %.1f ms%s | %d | %s | %.2f | %.2f | %.1f µs | %.0f µs | %s |\n",
				r.Peer, clients(r), r.GrantsPerSec, ratio(fl, r.GrantsPerSec), 100*r.InUse, r.Jain, r.MinGrants, r.MaxGrants,
				r.WaitP50us/1e3, xl(res, r.LocalPingus, r.WaitP50us), r.WaitP99us/1e3, xl(res, r.LocalPingus, r.WaitP99us), r.WaitMaxus/1e3, xl(res, r.LocalPingus, r.WaitMaxus),
				r.OverCapacity+r.OverCapacityAtomic, order(r), r.RoundTripsPerGrant, r.ServerCmdsPerGrant, r.ServerCPUusPerGrant, r.LocalPingus, errCell(r))
		}
		p("\nPermits in use: permits held × time over capacity × run time, from the clients' grant-to-release intervals. Over capacity: grants that took the permits held above the capacity, by those intervals and by a counter the workers share. A grant broke FIFO order if another worker's request, known to be waiting (fairlock: OnQueued had fired; a spinner: its first try had been refused) before this one was called, was granted after it; checkable grants are those that had such a waiter. Order is fence order for fairlock (Redis's own grant order) and grant time on the client for the spinner.\n\n")
		for _, r := range rows {
			callLines(b, r.Peer, r.runDetail, r.GrantsTotal)
		}
		p("\n")
	}
	if rows := res.Weighted; len(rows) > 0 {
		var fl float64
		if f := kindRow(rows, "fairlock"); f != nil {
			fl = f.GrantsPerSec
		}
		r0 := ranRow(rows)
		p("## 6b. Weighted semaphore: capacity %d, %d workers, each on its own client, one name; worker 0 asks for %d permits, the others for 1; hold %.0f ms, %.0f s\n\n", r0.Capacity, r0.Workers, r0.BigPermits, r0.HoldMs, r0.DurationS)
		p("| peer | grants/s | fl÷peer | permits in use | big worker's grants | a small worker's (mean) | big ÷ small | big's wait p50 | big's wait p99 | small's wait p99 | broke FIFO order (of checkable) | over capacity | Redis cmds/grant | server CPU/grant | PING p50 before | errors |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range rows {
			bg, sm := grantFigures{}, grantFigures{}
			if r.Big != nil {
				bg, sm = *r.Big, *r.Small
			}
			p("| %s | %.0f | %s | %.1f%% | %d | %.1f | %s | %.2f ms%s | %.2f ms%s | %.2f ms%s | %s | %d | %.2f | %.1f µs | %.0f µs | %s |\n",
				r.Peer, r.GrantsPerSec, ratio(fl, r.GrantsPerSec), 100*r.InUse, bg.Grants, r.SmallMeanGrants, ratio(float64(bg.Grants), r.SmallMeanGrants),
				bg.WaitP50us/1e3, xl(res, r.LocalPingus, bg.WaitP50us), bg.WaitP99us/1e3, xl(res, r.LocalPingus, bg.WaitP99us), sm.WaitP99us/1e3, xl(res, r.LocalPingus, sm.WaitP99us),
				order(r), r.OverCapacity+r.OverCapacityAtomic, r.ServerCmdsPerGrant, r.ServerCPUusPerGrant, r.LocalPingus, errCell(r))
		}
		p("\nA FIFO semaphore grants the big request when it reaches the head and its permits are free, and grants nothing behind it meanwhile; a spinner grants the big request only when it happens to try while every permit is free.\n\n")
		for _, r := range rows {
			callLines(b, r.Peer, r.runDetail, r.GrantsTotal)
		}
		p("\n")
	}
	if rows := res.Tenants; len(rows) > 0 {
		r0 := ranRow(rows)
		p("## 6c. Tenants: capacity %d, %d workers, each on its own client, in tenants %s; every request 1 permit, hold %.0f ms, %.0f s per row; fairlock with groups (WithGroup(tenant)), plain FIFO fairlock, and the spinning semaphore\n\n", r0.Capacity, r0.Workers, tenantLayout(r0), r0.HoldMs, r0.DurationS)
		p("| row | total grants/s | permits in use | tenant | workers | grants/s | share of grants | ÷ even share | wait p50 | wait p99 |\n|---|---|---|---|---|---|---|---|---|---|\n")
		tenantTable(p, res, rows, func(t TenantFigures) int { return t.Workers })
		p("\nA tenant with one worker asks again right after its release; under plain FIFO each request gets a turn, so a tenant's share follows its workers. With groups, a freed permit goes to the waiting group that has used the least permit-time (its virtual clock).\n\n")
		for _, r := range rows {
			callLines(b, r.Peer, r.runDetail, r.GrantsTotal)
		}
		p("\n")
	}
	if rows := res.WeightedTenants; len(rows) > 0 {
		r0 := ranRow(rows)
		p("## 6d. Weighted tenants: capacity %d, %d workers, each on its own client, in tenants %s of weights %s; every request 1 permit, hold %.0f ms, %.0f s per row; fairlock with weights (WithGroupWeight) and with groups alone\n\n", r0.Capacity, r0.Workers, tenantLayout(r0), tenantWeights(r0), r0.HoldMs, r0.DurationS)
		p("| row | total grants/s | permits in use | tenant | weight | grants/s | share of grants | ÷ weight's share | wait p50 | wait p99 |\n|---|---|---|---|---|---|---|---|---|---|\n")
		tenantTable(p, res, rows, func(t TenantFigures) int { return max(t.Weight, 1) })
		p("\nEvery tenant is backlogged and holds alike, so its share of grants is its share of permit-time. With weights, a freed permit goes to the waiting group with the lowest virtual clock (permit-time ÷ weight); with groups alone every weight is 1.\n\n")
		for _, r := range rows {
			callLines(b, r.Peer, r.runDetail, r.GrantsTotal)
		}
		p("\n")
	}
	laneTable(b, res)
	if rows := res.RWMutex; len(rows) > 0 {
		var fl float64
		if f := kindRow(rows, "fairlock"); f != nil && f.Readers != nil {
			fl = f.Readers.GrantsPerSec
		}
		r0 := ranRow(rows)
		p("## 7. Read-write lock: %d workers, each on its own client, one name, %d%% reads drawn per cycle (seed %d), hold %.0f ms, %.0f s\n\n", r0.Workers, r0.ReadPct, r0.Seed, r0.HoldMs, r0.DurationS)
		p("| peer | clients (conns dialled) | reader grants/s | fl÷peer | writer grants/s | writers' wait p50 | writers' wait p99 | writers' wait max | readers' wait p99 | broke FIFO order (of checkable) | readers past a waiting writer | writer overlaps | RT/grant | Redis cmds/grant | server CPU/grant | PING p50 before | errors |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range rows {
			rd, wr := grantFigures{}, grantFigures{}
			if r.Readers != nil {
				rd, wr = *r.Readers, *r.Writers
			}
			p("| %s | %s | %.0f | %s | %.0f | %.2f ms%s | %.2f ms%s | %.1f ms%s | %.2f ms%s | %s | %d | %d | %.2f | %.2f | %.1f µs | %.0f µs | %s |\n",
				r.Peer, clients(r), rd.GrantsPerSec, ratio(fl, rd.GrantsPerSec), wr.GrantsPerSec,
				wr.WaitP50us/1e3, xl(res, r.LocalPingus, wr.WaitP50us), wr.WaitP99us/1e3, xl(res, r.LocalPingus, wr.WaitP99us), wr.WaitMaxus/1e3, xl(res, r.LocalPingus, wr.WaitMaxus),
				rd.WaitP99us/1e3, xl(res, r.LocalPingus, rd.WaitP99us),
				order(r), r.PassedWriter, r.OverCapacity+r.OverCapacityAtomic, r.RoundTripsPerGrant, r.ServerCmdsPerGrant, r.ServerCPUusPerGrant, r.LocalPingus, errCell(r))
		}
		p("\nReaders past a waiting writer: readers that broke FIFO order against a writer waiting since before they were called. Writer overlaps: grants that put a writer beside any other holder, by the clients' intervals and by a shared counter. Fairlock's order is fence order, the spinner's grant time.\n\n")
		for _, r := range rows {
			callLines(b, r.Peer, r.runDetail, r.GrantsTotal)
		}
		p("\n")
	}
	if rows := res.SemaphoreDrain; len(rows) > 0 {
		p("## 8. Semaphore drain: waiters of 1 permit on one semaphore of capacity %d, queued behind one holder of all %d permits, which then releases (clients: fairlock one Locker for all waiters, one for the holder, one uncounted probe that polls Inspect; the spinner the same three clients)\n\n", rows[0].Capacity, rows[0].Capacity)
		p("| peer | waiters × rounds | enqueue (per round) | drain (per round) | per grant | RT/grant (all) | Redis cmds/grant (all) | Redis CPU/grant (all) | cmds/grant (drain only) | CPU/grant (drain only) | conns dialled | pub/sub conns | note |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, s := range rows {
			p("| %s | %d × %d | %.0f ms | %.1f ms | %.0f µs%s | %.2f | %.2f | %.1f µs | %.2f | %.1f µs | %d | %d | %s |\n",
				s.Peer, s.Waiters, max(s.Rounds, 1), s.EnqueueMs, s.DrainMs, s.PerGrantus, xl(res, s.LocalPingus, s.PerGrantus), s.RoundTripsPerGrant, s.ServerCmdsPerGrant, s.ServerCPUusPerGrant, s.DrainCmdsPerGrant, s.DrainCPUusPerGrant, s.Dials, s.PubsubConns, s.Note)
		}
		p("\nA case of fewer waiters than -sem-drain-grants runs in rounds, one after another on new names, so that its cost per grant is not the fixed cost of one run (connections dialled, the monitor's calls, a Redis gone cold); \"all\" is over every round, enqueue included; \"drain only\" is the last round's, from the holder's release to the last grant. The probe's commands are left out of the commands, not of the CPU.\n")
		p("\n")
		for _, s := range rows {
			callLines(b, s.Peer+" "+s.Case, s.runDetail, s.Granted)
		}
		p("\n")
	}
}

// kindTargets are issue 10's targets: the semaphore's and the read-write
// lock's against the spinning baseline, and the semaphore drain's cost.
func kindTargets(res *Results) []Target {
	var ts []Target
	add := func(area, target, value string, met bool) {
		ts = append(ts, Target{Area: area, Target: target, Value: value, Met: met})
	}
	noErrors := func(area string, f *KindResult) {
		if f.Errors > 0 || f.Note != "" {
			add(area, "no errors", fmt.Sprintf("%d errors %s", f.Errors, f.Note), false)
		}
	}
	order := func(area string, f *KindResult) {
		add(area, "zero grants that broke FIFO order", fmt.Sprintf("%d of %d checkable grants (by %s)", f.OrderBroken, f.OrderChecked, f.OrderBy), f.OrderBroken == 0)
	}
	noOverCapacity := func(area string, f *KindResult) {
		add(area, "zero over-capacity moments", fmt.Sprintf("%d (interval check), %d (in-process counter)", f.OverCapacity, f.OverCapacityAtomic), f.OverCapacity == 0 && f.OverCapacityAtomic == 0)
	}
	if f := kindRow(res.Semaphore, "fairlock"); f != nil {
		area := kindArea(*f)
		if sp := spinnerRow(res.Semaphore); sp != nil {
			add(area, "grants/s ≥ 1.1× the spinning semaphore (sleeps 1 ms)", fmt.Sprintf("%.0f vs %s %.0f = %.3f×", f.GrantsPerSec, sp.Peer, sp.GrantsPerSec, f.GrantsPerSec/sp.GrantsPerSec), f.GrantsPerSec >= 1.1*sp.GrantsPerSec)
		}
		add(area, "Jain's index ≥ 0.999", fmt.Sprintf("%.5f (min %d / max %d grants)", f.Jain, f.MinGrants, f.MaxGrants), f.Jain >= 0.999)
		order(area, f)
		noOverCapacity(area, f)
		noErrors(area, f)
	}
	if f := kindRow(res.RWMutex, "fairlock"); f != nil && f.Writers != nil {
		area := kindArea(*f)
		w := f.Writers
		// At most workers - 1 requests are ahead of a writer, each holding
		// for a hold and handing over; a run of readers ahead shares one.
		bound := 1.5 * float64(f.Workers) * (f.HoldMeanus + f.WriterGapP50us)
		vs, passed := "", ""
		if sp := spinnerRow(res.RWMutex); sp != nil && sp.Writers != nil {
			vs = fmt.Sprintf("; spinning %s: p99 %.1f ms, max %.1f ms", sp.Peer, sp.Writers.WaitP99us/1e3, sp.Writers.WaitMaxus/1e3)
			passed = fmt.Sprintf(" (spinning %s: %d)", sp.Peer, sp.PassedWriter)
		}
		if sp := spinnerRow(res.RWMutex); sp != nil && sp.Readers != nil && sp.Readers.GrantsPerSec > 0 {
			add(area, "reader grants/s ≥ 1.1× the spinning read-write lock", fmt.Sprintf("%.0f vs %s %.0f = %.3f×", f.Readers.GrantsPerSec, sp.Peer, sp.Readers.GrantsPerSec, f.Readers.GrantsPerSec/sp.Readers.GrantsPerSec), f.Readers.GrantsPerSec >= 1.1*sp.Readers.GrantsPerSec)
			if sp.Writers.WaitP99us > 0 {
				add(area, "writers' wait p99 ≤ 0.1× the spinning read-write lock's", fmt.Sprintf("%.2f ms vs %s %.1f ms = %.3f×", w.WaitP99us/1e3, sp.Peer, sp.Writers.WaitP99us/1e3, w.WaitP99us/sp.Writers.WaitP99us), w.WaitP99us <= 0.1*sp.Writers.WaitP99us)
			}
		}
		add(area, "writers' wait bounded by the requests ahead: max ≤ 1.5 × workers × (hold + writer hand-off)",
			fmt.Sprintf("max %.2f ms, p99 %.2f ms vs bound %.2f ms (hold %.0f µs measured, hand-off = writer gap p50 %.0f µs)%s", w.WaitMaxus/1e3, w.WaitP99us/1e3, bound/1e3, f.HoldMeanus, f.WriterGapP50us, vs), w.WaitMaxus <= bound)
		add(area, "no reader granted ahead of a writer waiting since before it was called", fmt.Sprintf("%d%s", f.PassedWriter, passed), f.PassedWriter == 0)
		order(area, f)
		add(area, "zero overlaps of a writer with anyone", fmt.Sprintf("%d (interval check), %d (in-process counter)", f.OverCapacity, f.OverCapacityAtomic), f.OverCapacity == 0 && f.OverCapacityAtomic == 0)
		noErrors(area, f)
	}
	if f := kindRow(res.Weighted, "fairlock"); f != nil && f.Big != nil {
		area := kindArea(*f)
		if sp := spinnerRow(res.Weighted); sp != nil {
			add(area, "grants/s ≥ 0.9× the spinning semaphore", fmt.Sprintf("%.0f vs %s %.0f = %.3f× (the spinner's big worker: %d grants)", f.GrantsPerSec, sp.Peer, sp.GrantsPerSec, f.GrantsPerSec/sp.GrantsPerSec, bigGrants(sp)), f.GrantsPerSec >= 0.9*sp.GrantsPerSec)
		}
		add(area, fmt.Sprintf("the big worker's grants (%d permits each) ≥ 0.9× a small worker's mean", f.BigPermits),
			fmt.Sprintf("%d vs %.1f = %.3f×", f.Big.Grants, f.SmallMeanGrants, float64(f.Big.Grants)/math.Max(f.SmallMeanGrants, 1e-9)), float64(f.Big.Grants) >= 0.9*f.SmallMeanGrants)
		order(area, f)
		noOverCapacity(area, f)
		noErrors(area, f)
	}
	if g, fifo := tenantRow(res.Tenants, true), tenantRow(res.Tenants, false); g != nil {
		area := kindArea(*g)
		quarter := 1 / float64(len(g.Tenants))
		for _, t := range g.Tenants {
			if t.Workers != 1 {
				continue
			}
			others := ""
			for _, o := range res.Tenants {
				if o.Peer == g.Peer {
					continue
				}
				for _, ot := range o.Tenants {
					if ot.Name == t.Name {
						others += fmt.Sprintf("; %s: %.1f%%", o.Peer, 100*ot.Share)
					}
				}
			}
			add(area, fmt.Sprintf("tenant %s (1 worker) gets ≥ 0.8× an even share (1/%d) of all grants, with groups", t.Name, len(g.Tenants)),
				fmt.Sprintf("%.1f%% of %d grants = %.3f× of %.1f%% (%.0f grants/s, wait p50 %.2f ms, p99 %.2f ms%s)", 100*t.Share, g.Grants, t.Share/quarter, 100*quarter, t.GrantsPerSec, t.WaitP50us/1e3, t.WaitP99us/1e3, others), t.Share >= 0.8*quarter)
		}
		if fifo != nil && fifo.GrantsPerSec > 0 {
			add(area, "total grants/s with groups ≥ 0.95× plain FIFO's", fmt.Sprintf("%.0f vs %.0f = %.3f×", g.GrantsPerSec, fifo.GrantsPerSec, g.GrantsPerSec/fifo.GrantsPerSec), g.GrantsPerSec >= 0.95*fifo.GrantsPerSec)
		}
		noOverCapacity(area, g)
		noErrors(area, g)
	}
	if w := kindRow(res.WeightedTenants, "fairlock (weights)"); w != nil {
		area := fmt.Sprintf("Weighted tenants (capacity %d, %s workers, weights %s)", w.Capacity, tenantLayout(*w), tenantWeights(*w))
		for _, t := range w.Tenants {
			off := math.Abs(t.Share/math.Max(t.FairShare, 1e-9) - 1)
			add(area, fmt.Sprintf("tenant %s (weight %d) gets its weight's share (%.1f%%) of all grants, within 10%%", t.Name, t.Weight, 100*t.FairShare),
				fmt.Sprintf("%.1f%% of %d grants, %.1f%% off", 100*t.Share, w.Grants, 100*off), off <= 0.10)
		}
		noOverCapacity(area, w)
		noErrors(area, w)
	}
	if l := laneRow(res.PriorityLanes, true, false); l != nil {
		if sat := laneRow(res.PriorityLanes, true, true); sat != nil {
			// Only there does aging decide when a batch request is granted.
			l = sat
		}
		area := kindArea(*l)
		fifo := ""
		if f := laneRow(res.PriorityLanes, false, false); f != nil {
			fifo = fmt.Sprintf("; without priorities the batch workers' worst was %.1f ms", f.Lanes.Batch.WaitMaxus/1e3)
		}
		add(area, fmt.Sprintf("the batch workers' (priority 0) worst wait ≤ %d × aging + their FIFO bound", maxPriority),
			fmt.Sprintf("%.1f ms vs %.1f ms = %d × %.0f ms + %.1f ms%s", l.Lanes.Batch.WaitMaxus/1e3, laneBound(l.Lanes)/1e3, maxPriority, l.Lanes.AgingMs, l.Lanes.FIFOBoundus/1e3, fifo),
			l.Lanes.Batch.WaitMaxus <= laneBound(l.Lanes))
		add(area, "zero batch grants that broke FIFO order (priority 0 keeps arrival order)",
			fmt.Sprintf("%d of %d checkable grants (by %s)", l.Lanes.BatchOrderBroken, l.Lanes.BatchOrderChecked, l.OrderBy), l.Lanes.BatchOrderBroken == 0)
		noOverCapacity(area, l)
		noErrors(area, l)
	}
	var small, big *ScaleResult
	for i := range res.SemaphoreDrain {
		s := &res.SemaphoreDrain[i]
		if s.Peer != "fairlock" || s.Granted == 0 {
			continue
		}
		if small == nil || s.Waiters < small.Waiters {
			small = s
		}
		if big == nil || s.Waiters > big.Waiters {
			big = s
		}
		if s.Granted != s.Waiters*max(s.Rounds, 1) || s.Note != "" {
			add("Semaphore drain", s.Case+": every waiter granted", fmt.Sprintf("%d of %d %s", s.Granted, s.Waiters*max(s.Rounds, 1), s.Note), false)
		}
	}
	if small != nil && big != small {
		within := func(what string, a, b float64, unit string) {
			add("Semaphore drain", fmt.Sprintf("%d waiters: %s per grant within 20%% of %d waiters", big.Waiters, what, small.Waiters),
				fmt.Sprintf("%.2f%s vs %.2f%s = %.2f×", a, unit, b, unit, a/b), a <= 1.2*b && a >= 0.8*b)
		}
		within("Redis commands", big.ServerCmdsPerGrant, small.ServerCmdsPerGrant, "")
		within("Redis CPU", big.ServerCPUusPerGrant, small.ServerCPUusPerGrant, " µs")
	}
	return ts
}

// bigGrants is the big worker's grants of a weighted row, 0 if none.
func bigGrants(r *KindResult) int {
	if r.Big == nil {
		return 0
	}
	return r.Big.Grants
}

// tenantRow is the fairlock row of the tenants scenario, with groups or
// plain FIFO, that ran; nil if none did.
func tenantRow(rows []KindResult, groups bool) *KindResult {
	for i := range rows {
		r := &rows[i]
		if strings.HasPrefix(r.Peer, "fairlock") && r.Groups == groups && r.GrantsTotal > 0 {
			return r
		}
	}
	return nil
}

// kindArea names a kind row in the targets.
func kindArea(r KindResult) string {
	switch r.Kind {
	case "semaphore":
		return fmt.Sprintf("Semaphore (capacity %d, %d workers)", r.Capacity, r.Workers)
	case "weighted":
		return fmt.Sprintf("Weighted semaphore (capacity %d, 1 worker × %d permits, %d × 1)", r.Capacity, r.BigPermits, r.Workers-1)
	case "tenants":
		return fmt.Sprintf("Tenants (capacity %d, %s workers)", r.Capacity, tenantLayout(r))
	case "priority-lanes":
		return fmt.Sprintf("Priority lanes (capacity %d, %d batch workers, %d interactive at priority %d, aging %.0f ms)",
			r.Capacity, r.Lanes.BatchWorkers, r.Lanes.InteractiveWorkers, r.Lanes.InteractivePriority, r.Lanes.AgingMs)
	}
	return fmt.Sprintf("RWMutex (%d workers, %d%% reads)", r.Workers, r.ReadPct)
}
