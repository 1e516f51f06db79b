package main

import (
	"fmt"
	"strings"
)

// laneRow is the priority-lanes row with priorities, or without, and
// saturated or not, that ran; nil if none did.
func laneRow(rows []KindResult, priorities, saturated bool) *KindResult {
	for i := range rows {
		r := &rows[i]
		if r.Lanes != nil && r.Lanes.Priorities == priorities && r.Lanes.Saturated == saturated && r.GrantsTotal > 0 {
			return r
		}
	}
	return nil
}

// laneBound is the longest a batch request (priority 0) may wait in the
// row: its FIFO bound, and maxPriority agings more with priorities.
func laneBound(l *LaneFigures) float64 { return l.AgingBoundus + l.FIFOBoundus }

// laneTable writes section 6e, the priority-lanes rows, and what the
// priorities bought the interactive requests.
func laneTable(b *strings.Builder, res *Results) {
	rows := res.PriorityLanes
	if len(rows) == 0 {
		return
	}
	p := func(f string, a ...any) { fmt.Fprintf(b, f, a...) }
	r0 := ranRow(rows)
	l0 := r0.Lanes
	aging := "the default aging"
	if pr := laneRow(rows, true, false); pr != nil {
		aging = fmt.Sprintf("aging %.0f ms (WithPriorityAging)", pr.Lanes.AgingMs)
	}
	p("## 6e. Priority lanes: capacity %d, %d batch workers who ask again at once and %d interactive workers who pause %.0f ms after each release, each on its own client, one name; every request 1 permit, hold %.0f ms, %.0f s per row; fairlock with the interactive requests at priority %d and the Lockers' %s, and with every request at priority 0 (FIFO)\n\n",
		r0.Capacity, l0.BatchWorkers, l0.InteractiveWorkers, l0.PauseMs, r0.HoldMs, r0.DurationS, maxPriority, aging)
	p("| row | total grants/s | permits in use | interactive grants/s | interactive wait p50 | p99 | max | batch grants/s | batch wait p50 | p99 | max | batch's worst wait vs its bound | interactive grants that passed an earlier waiter (of checkable) | batch grants that broke FIFO order (of checkable) | over capacity | Redis cmds/grant | server CPU/grant | PING p50 before | errors |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		l := r.Lanes
		in, bt := l.Interactive, l.Batch
		p("| %s | %.0f | %.1f%% | %.0f | %.2f ms%s | %.2f ms%s | %.1f ms%s | %.0f | %.2f ms%s | %.2f ms%s | %.1f ms%s | %.1f of %.1f ms | %d of %d | %d of %d | %d | %.2f | %.1f µs | %.0f µs | %s |\n",
			r.Peer, r.GrantsPerSec, 100*r.InUse, in.GrantsPerSec,
			in.WaitP50us/1e3, xl(res, r.LocalPingus, in.WaitP50us), in.WaitP99us/1e3, xl(res, r.LocalPingus, in.WaitP99us), in.WaitMaxus/1e3, xl(res, r.LocalPingus, in.WaitMaxus),
			bt.GrantsPerSec, bt.WaitP50us/1e3, xl(res, r.LocalPingus, bt.WaitP50us), bt.WaitP99us/1e3, xl(res, r.LocalPingus, bt.WaitP99us), bt.WaitMaxus/1e3, xl(res, r.LocalPingus, bt.WaitMaxus),
			bt.WaitMaxus/1e3, laneBound(l)/1e3, l.InteractivePassed, l.InteractiveOrderChecked, l.BatchOrderBroken, l.BatchOrderChecked,
			r.OverCapacity+r.OverCapacityAtomic, r.ServerCmdsPerGrant, r.ServerCPUusPerGrant, r.LocalPingus, errCell(r))
	}
	p("\n")
	pr, fifo := laneRow(rows, true, false), laneRow(rows, false, false)
	if pr != nil && fifo != nil && pr.Lanes.Interactive.WaitP99us > 0 {
		pi, fi := pr.Lanes.Interactive, fifo.Lanes.Interactive
		p("What the priorities buy: the interactive requests' wait p99 is %.2f ms without them and %.2f ms with them, %.1f× shorter (p50 %.2f ms and %.2f ms); the batch workers' p99 goes from %.2f ms to %.2f ms.\n\n",
			fi.WaitP99us/1e3, pi.WaitP99us/1e3, fi.WaitP99us/pi.WaitP99us, fi.WaitP50us/1e3, pi.WaitP50us/1e3, fifo.Lanes.Batch.WaitP99us/1e3, pr.Lanes.Batch.WaitP99us/1e3)
	}
	if pr != nil {
		l := pr.Lanes
		p("The batch workers' bound: a waiter of priority 0 waits at most %d agings more than it would behind the requests that came before it were they all of one priority (WithPriorityAging): here %d × %.0f ms + %.1f ms = %.1f ms. ", maxPriority, maxPriority, l.AgingMs, l.FIFOBoundus/1e3, laneBound(l)/1e3)
		p("That FIFO bound is ⌈(workers − capacity) ÷ capacity⌉ × (mean hold + hand-off p50) = ⌈(%d − %d) ÷ %d⌉ × (%.0f µs + %.0f µs), from the row's own grants: at most workers − 1 requests are ahead of a request, capacity of them holding, so it is granted at the latest at the (workers − capacity)th release after its call, and each permit is released once per hold and hand-off (the time from the last release before a grant to the grant). It leaves out the stalls of this machine, which the aging term dwarfs.\n\n",
			pr.Workers, pr.Capacity, pr.Capacity, pr.HoldMeanus, l.HandoffP50us)
	}
	if sat := laneRow(rows, true, true); sat != nil {
		l := sat.Lanes
		p("Aging at work, the saturated row: %d interactive workers at priority %d ask again at once for %d permits, so without aging no batch request would ever be granted. With aging %.0f ms the batch workers got %.0f grants/s, and their worst wait was %.1f ms against the bound %d × %.0f ms + %.1f ms = %.1f ms.\n\n",
			l.InteractiveWorkers, maxPriority, sat.Capacity, l.AgingMs, l.Batch.GrantsPerSec, l.Batch.WaitMaxus/1e3, maxPriority, l.AgingMs, l.FIFOBoundus/1e3, laneBound(l)/1e3)
	}
	p("An interactive grant passed an earlier waiter when a batch request, known to be waiting (OnQueued had fired) before the interactive one was called, was granted after it (by fence); a batch grant that did so would break the order of priority 0, which keeps arrival order. An interactive worker's pause comes after its release, so it counts in neither its wait nor its hold.\n\n")
	for _, r := range rows {
		callLines(b, r.Peer, r.runDetail, r.GrantsTotal)
	}
	p("\n")
}
