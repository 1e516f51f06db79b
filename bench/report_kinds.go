package main

import (
	"fmt"
	"strings"
)

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

// kindTables writes the semaphore, read-write lock and semaphore drain
// sections.
func kindTables(b *strings.Builder, res *Results) {
	p := func(f string, a ...any) { fmt.Fprintf(b, f, a...) }
	errCell := func(r KindResult) string {
		if r.Note != "" {
			return fmt.Sprintf("%d %s", r.Errors, r.Note)
		}
		return fmt.Sprint(r.Errors)
	}
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
	if f := kindRow(res.Semaphore, "fairlock"); f != nil {
		area := kindArea(*f)
		if sp := spinnerRow(res.Semaphore); sp != nil {
			add(area, "grants/s ≥ 1.0× the spinning baseline", fmt.Sprintf("%.0f vs %s %.0f = %.2f×", f.GrantsPerSec, sp.Peer, sp.GrantsPerSec, f.GrantsPerSec/sp.GrantsPerSec), f.GrantsPerSec >= sp.GrantsPerSec)
		}
		add(area, "Jain's index ≥ 0.999", fmt.Sprintf("%.5f (min %d / max %d grants)", f.Jain, f.MinGrants, f.MaxGrants), f.Jain >= 0.999)
		order(area, f)
		add(area, "zero over-capacity moments", fmt.Sprintf("%d (interval check), %d (in-process counter)", f.OverCapacity, f.OverCapacityAtomic), f.OverCapacity == 0 && f.OverCapacityAtomic == 0)
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
		add(area, "writers' wait bounded by the requests ahead: max ≤ 1.5 × workers × (hold + writer hand-off)",
			fmt.Sprintf("max %.2f ms, p99 %.2f ms vs bound %.2f ms (hold %.0f µs measured, hand-off = writer gap p50 %.0f µs)%s", w.WaitMaxus/1e3, w.WaitP99us/1e3, bound/1e3, f.HoldMeanus, f.WriterGapP50us, vs), w.WaitMaxus <= bound)
		add(area, "no reader granted ahead of a writer waiting since before it was called", fmt.Sprintf("%d%s", f.PassedWriter, passed), f.PassedWriter == 0)
		order(area, f)
		add(area, "zero overlaps of a writer with anyone", fmt.Sprintf("%d (interval check), %d (in-process counter)", f.OverCapacity, f.OverCapacityAtomic), f.OverCapacity == 0 && f.OverCapacityAtomic == 0)
		noErrors(area, f)
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

// kindArea names a kind row in the targets.
func kindArea(r KindResult) string {
	if r.Kind == "semaphore" {
		return fmt.Sprintf("Semaphore (capacity %d, %d workers)", r.Capacity, r.Workers)
	}
	return fmt.Sprintf("RWMutex (%d workers, %d%% reads)", r.Workers, r.ReadPct)
}
