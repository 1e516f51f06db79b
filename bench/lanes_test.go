package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestFIFOBound(t *testing.T) {
	for _, c := range []struct {
		workers, capacity int
		want              float64
	}{
		{14, 4, 3 * 1200}, // the 10th release: three rounds of 4 permits
		{14, 1, 13 * 1200},
		{8, 4, 1200},
		{4, 4, 0}, // nobody waits
	} {
		if got := fifoBound(c.workers, c.capacity, 1000, 200); got != c.want {
			t.Errorf("fifoBound(%d, %d) = %v, want %v", c.workers, c.capacity, got, c.want)
		}
	}
}

// TestPausing checks that the pause comes after the release, inside the
// unlock that runCycles times after the hold.
func TestPausing(t *testing.T) {
	var released time.Time
	take := pausing(func(context.Context) (taken, error) {
		return taken{unlock: func(context.Context) error { released = time.Now(); return nil }}, nil
	}, 20*time.Millisecond)
	g, err := take(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := g.unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if released.Sub(start) > 10*time.Millisecond || time.Since(start) < 20*time.Millisecond {
		t.Fatalf("released %v after the call, unlock returned after %v", released.Sub(start), time.Since(start))
	}
}

// TestLaneReport renders made-up rows: section 6e with the interactive
// ratio, and the bound's target, met and then missed.
func TestLaneReport(t *testing.T) {
	row := func(peer string, priorities bool, interactiveP99, batchMax float64) KindResult {
		r := KindResult{Peer: peer, Kind: "priority-lanes", Workers: 14, Clients: 14, Capacity: 4, HoldMs: 1, OrderBy: "fence"}
		r.GrantsTotal, r.Grants, r.HoldMeanus = 1000, 1000, 1000
		r.Lanes = &LaneFigures{Priorities: priorities, BatchWorkers: 12, InteractiveWorkers: 2, PauseMs: 20, HandoffP50us: 200, FIFOBoundus: 3600,
			Interactive: grantFigures{WaitP50us: interactiveP99 / 2, WaitP99us: interactiveP99}, Batch: grantFigures{WaitMaxus: batchMax}}
		if priorities {
			r.Lanes.InteractivePriority, r.Lanes.AgingMs, r.Lanes.AgingBoundus = 9, 500, 4.5e6
		}
		return r
	}
	res := &Results{PriorityLanes: []KindResult{row("fairlock (priorities)", true, 500, 20e3), row("fairlock (FIFO)", false, 5000, 8e3)}}
	md := markdown(res)
	for _, want := range []string{"## 6e. Priority lanes: capacity 4, 12 batch workers", "aging 500 ms (WithPriorityAging)",
		"wait p99 is 5.00 ms without them and 0.50 ms with them, 10.0× shorter", "9 × 500 ms + 3.6 ms = 4503.6 ms", "| 20.0 of 4503.6 ms |", "| 8.0 of 3.6 ms |"} {
		if !strings.Contains(md, want) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
	bound := func() *Target {
		for _, tg := range evalTargets(res) {
			if strings.HasPrefix(tg.Area, "Priority lanes") && strings.Contains(tg.Target, "worst wait") {
				return &tg
			}
		}
		return nil
	}
	if tg := bound(); tg == nil || !tg.Met || !strings.Contains(tg.Value, "without priorities the batch workers' worst was 8.0 ms") {
		t.Fatalf("bound target %+v, want met", tg)
	}
	res.PriorityLanes[0].Lanes.Batch.WaitMaxus = 5e6
	if tg := bound(); tg == nil || tg.Met {
		t.Fatalf("bound target %+v, want missed", tg)
	}
}
