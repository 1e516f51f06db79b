package main

import "testing"

func TestOverCapacity(t *testing.T) {
	// capacity 2: three 1-permit holders at 12-15 exceed it once; a
	// 2-permit holder at 30-40 fills it alone, and a grant at 40, when it
	// releases, does not count.
	recs := []rec{
		{W: 0, TG: 0, TR: 20},
		{W: 1, TG: 10, TR: 15},
		{W: 2, TG: 12, TR: 25},
		{W: 0, TG: 30, TR: 40, N: 2},
		{W: 1, TG: 40, TR: 45},
	}
	if n := overCapacity(recs, 2, 0, 100); n != 1 {
		t.Fatalf("over capacity %d, want 1", n)
	}
	// outside the window nothing counts
	if n := overCapacity(recs, 2, 20, 100); n != 0 {
		t.Fatalf("over capacity from 20: %d, want 0", n)
	}
	// a writer weighing all 3 workers beside one reader
	rw := []rec{{W: 0, TG: 0, TR: 10, N: 3, Write: true}, {W: 1, TG: 5, TR: 8}}
	if n := overCapacity(rw, 3, 0, 100); n != 1 {
		t.Fatalf("writer overlap %d, want 1", n)
	}
}

func TestBrokeOrder(t *testing.T) {
	// Worker 0 is known to wait from 2 (TQ); worker 1 is called at 3 and
	// granted before it: broken. Worker 2 is called at 1, before worker 0
	// was known to wait, and granted first: not broken, and not checkable
	// (nobody was known waiting at 1).
	recs := []rec{
		{W: 2, T0: 1, TG: 5, TR: 6, Fence: 1},
		{W: 1, T0: 3, TG: 7, TR: 8, Fence: 2},
		{W: 0, T0: 0, TQ: 2, TG: 9, TR: 10, Fence: 3},
	}
	checked, broken, passed := brokeOrder(recs, 3, 0, 100, nil)
	if checked != 1 || broken != 1 || passed != 0 {
		t.Fatalf("checked %d broken %d passed writer %d, want 1 1 0", checked, broken, passed)
	}
	// By fence, the client's grant times do not matter: worker 1's grant
	// arriving before worker 0's, though Redis granted it after, is fine.
	recs[1].Fence, recs[2].Fence = 3, 2
	if _, broken, _ := brokeOrder(recs, 3, 0, 100, nil); broken != 0 {
		t.Fatalf("by fence: broken %d, want 0", broken)
	}
	// Without fences, grant time decides; a reader passing a writer counts.
	recs[1].Fence, recs[2].Fence, recs[0].Fence = 0, 0, 0
	recs[2].Write = true
	if _, broken, passed := brokeOrder(recs, 3, 0, 100, nil); broken != 1 || passed != 1 {
		t.Fatalf("by time: broken %d passed writer %d, want 1 1", broken, passed)
	}
}

func TestReleaseGaps(t *testing.T) {
	recs := []rec{
		{W: 0, TG: 0, TR: 10},
		{W: 1, TG: 2, TR: 12},
		{W: 2, TG: 15, TR: 20, Write: true}, // 3 after the last release, 12
		{W: 0, TG: 21, TR: 22},
	}
	g := releaseGaps(recs, 0, 100, func(x rec) bool { return x.Write })
	if len(g) != 1 || g[0] != 3 {
		t.Fatalf("writer gaps %v, want [3]", g)
	}
	// Every grant that had a release before it: 15 - 12, 21 - 20.
	if g := releaseGaps(recs, 0, 100, nil); len(g) != 2 || g[0] != 3 || g[1] != 1 {
		t.Fatalf("gaps %v, want [3 1]", g)
	}
}

func TestFiguresKeep(t *testing.T) {
	recs := []rec{
		{W: 0, T0: 0, TG: 10, TR: 20},
		{W: 1, T0: 0, TG: 30, TR: 40, N: 4, Write: true},
	}
	w, pt := figures(recs, 2, 0, 1e9, func(x rec) bool { return x.Write })
	if w.Grants != 1 || w.WaitMaxus != 0.03 || pt != 40 {
		t.Fatalf("writers: %d grants, wait max %v, permit time %d", w.Grants, w.WaitMaxus, pt)
	}
}
