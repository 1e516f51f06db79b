package main

import (
	"context"
	"math"
	"time"
)

// maxPriority is fairlock.MaxPriority, the interactive workers' priority,
// which a waiter of priority 0 reaches after waiting maxPriority agings.
// It is written out because this file builds without fairlock too.
const maxPriority = 9

// LaneFigures are the priority-lanes row's own figures: the batch workers'
// grants and the interactive workers', and the bound on the batch
// workers' wait.
type LaneFigures struct {
	// Priorities tells whether the interactive requests asked for
	// InteractivePriority; without, every request has priority 0: the
	// plain FIFO semaphore.
	Priorities bool `json:"priorities"`
	// Saturated tells that the interactive workers alone keep every permit
	// busy (more of them than permits, and no pause): without aging, no
	// batch request would ever be granted.
	Saturated           bool `json:"saturated,omitempty"`
	BatchWorkers        int  `json:"batch_workers"`
	InteractiveWorkers  int  `json:"interactive_workers"`
	InteractivePriority int  `json:"interactive_priority"`
	// PauseMs is an interactive worker's pause after each release; AgingMs
	// the Lockers' WithPriorityAging, 0 for the default.
	PauseMs     float64      `json:"pause_ms"`
	AgingMs     float64      `json:"aging_ms,omitempty"`
	Batch       grantFigures `json:"batch"`
	Interactive grantFigures `json:"interactive"`
	// BatchWaits and InteractiveWaits are the distributions of each
	// lane's waits in the window, which the lanes plot draws.
	BatchWaits       *WaitHist `json:"batch_waits,omitempty"`
	InteractiveWaits *WaitHist `json:"interactive_waits,omitempty"`
	// The grants of each kind that broke FIFO order, of those that could
	// (see brokeOrder): with priorities the interactive grants pass the
	// batch waiters before them, and a batch grant passes nobody.
	BatchOrderChecked       int `json:"batch_order_checked"`
	BatchOrderBroken        int `json:"batch_order_broken"`
	InteractiveOrderChecked int `json:"interactive_order_checked"`
	InteractivePassed       int `json:"interactive_passed"`
	// HandoffP50us is the median time from the last release before a
	// grant to the grant.
	HandoffP50us float64 `json:"handoff_p50_us"`
	// FIFOBoundus is the longest a batch request waits behind the requests
	// that came before it, were they all of one priority (fifoBound);
	// AgingBoundus is what aging lets the requests of higher priority that
	// came after it add to that: maxPriority agings, 0 without priorities.
	FIFOBoundus  float64 `json:"fifo_bound_us"`
	AgingBoundus float64 `json:"aging_bound_us,omitempty"`
}

// runPriorityLanes: l.batch workers ask for 1 permit of one semaphore of
// l.capacity at priority 0, hold it, release, and ask again at once, a
// backlog that never empties; l.interactive workers do the same at
// maxPriority (priority 0 too, unless priorities), then pause l.pause
// after each release. Each worker is on its own client; with priorities,
// every Locker ages its waiters by l.aging. row names the row.
func runPriorityLanes(p peer, row string, priorities bool, e *env, mon *monitor, l laneConfig, hold time.Duration) KindResult {
	workers := l.batch + l.interactive
	r := KindResult{Peer: row, Kind: "priority-lanes", Workers: workers, Clients: workers, Capacity: l.capacity, HoldMs: hold.Seconds() * 1e3}
	lanes := &LaneFigures{Priorities: priorities, BatchWorkers: l.batch, InteractiveWorkers: l.interactive, PauseMs: l.pause.Seconds() * 1e3}
	r.Lanes = lanes
	name := "lanes-fifo"
	if priorities {
		name = "lanes-priorities"
		lanes.InteractivePriority, lanes.AgingMs = maxPriority, l.aging.Seconds()*1e3
		// The FIFO row keeps the default aging: its requests then take the
		// path of requests without a priority, the semaphore as it was.
		aged := *e
		aged.Aging = l.aging
		e = &aged
	}
	batch := func(x rec) bool { return x.W < l.batch }
	interactive := func(x rec) bool { return x.W >= l.batch }
	noPriorities := false
	run := runKind(&r, p, semaphoreAsPeer(p, l.capacity), e, mon, int64(l.capacity), hold, l.dur, func(id int, w kindWorker) cycle {
		take := func(ctx context.Context) (taken, error) { return w.Semaphore(ctx, name, l.capacity, 1) }
		if id < l.batch {
			return take
		}
		if ps, ok := w.(prioritySemaphore); ok && priorities {
			take = func(ctx context.Context) (taken, error) {
				return ps.SemaphorePriority(ctx, name, l.capacity, 1, maxPriority)
			}
		} else {
			noPriorities = noPriorities || priorities
		}
		return pausing(take, l.pause)
	})
	if run.recs == nil {
		return r
	}
	if noPriorities {
		r.Note, lanes.Priorities = "the peer has no priorities: FIFO", false
	}
	_, permitTime := figures(run.recs, workers, run.startAt, run.endAt, nil)
	r.InUse = float64(permitTime) / float64(int64(l.capacity)*(run.endAt-run.startAt))
	lanes.Batch, _ = figures(run.recs, workers, run.startAt, run.endAt, batch)
	lanes.Interactive, _ = figures(run.recs, workers, run.startAt, run.endAt, interactive)
	lanes.BatchWaits = newWaitHist(windowWaits(run.recs, run.startAt, run.endAt, batch))
	lanes.InteractiveWaits = newWaitHist(windowWaits(run.recs, run.startAt, run.endAt, interactive))
	lanes.BatchOrderChecked, lanes.BatchOrderBroken, _ = brokeOrder(run.recs, workers, run.startAt, run.endAt, batch)
	lanes.InteractiveOrderChecked, lanes.InteractivePassed, _ = brokeOrder(run.recs, workers, run.startAt, run.endAt, interactive)
	lanes.HandoffP50us = us(percentile(releaseGaps(run.recs, run.startAt, run.endAt, nil), 50))
	lanes.FIFOBoundus = fifoBound(workers, l.capacity, r.HoldMeanus, lanes.HandoffP50us)
	if priorities {
		lanes.AgingBoundus = maxPriority * lanes.AgingMs * 1e3
	}
	return r
}

// pausing is take, whose release then sleeps pause: runCycles notes the
// next call only after the release returns, so the pause counts in no
// wait (nor hold: it comes after the release started).
func pausing(take cycle, pause time.Duration) cycle {
	return func(ctx context.Context) (taken, error) {
		t, err := take(ctx)
		if err != nil {
			return t, err
		}
		release := t.unlock
		t.unlock = func(ctx context.Context) error {
			err := release(ctx)
			time.Sleep(pause)
			return err
		}
		return t, nil
	}
}

// fifoBound is the longest a request waits on a FIFO semaphore of
// capacity permits shared by workers who each ask for 1 permit and hold it
// for hold (µs), handed over in handoff (µs): at most workers - 1 requests
// are ahead of it, capacity of them holding, so its grant is at most the
// (workers - capacity)th release from its call, and each permit is
// released once per hold and hand-off.
func fifoBound(workers, capacity int, hold, handoff float64) float64 {
	if workers <= capacity {
		return 0
	}
	return math.Ceil(float64(workers-capacity)/float64(capacity)) * (hold + handoff)
}
