package main

import "testing"

func TestRuntimeClockIsClockMonotonic(t *testing.T) {
	if !useRuntimeClock {
		t.Fatal("runtime.nanotime is not CLOCK_MONOTONIC here; mono falls back to the system call")
	}
	a, b := clockGettime(), nanotime()
	if d := b - a; d < 0 || d > 1e6 {
		t.Fatalf("runtime.nanotime %d vs clock_gettime %d", b, a)
	}
}

func TestJain(t *testing.T) {
	if j := jain([]int64{5, 5, 5, 5}); j != 1 {
		t.Fatalf("equal shares: %v", j)
	}
	if j := jain([]int64{1, 0, 0, 0}); j != 0.25 {
		t.Fatalf("one of four: %v", j)
	}
}

func TestAnalyse(t *testing.T) {
	// worker 0 holds 10-20, worker 1 (waiting since 5) 25-35, worker 1 again
	// 40-50 while worker 0 waits since 30: a grant back to the releaser;
	// worker 0 at 45-55 overlaps it.
	recs := []rec{
		{W: 0, T0: 0, TG: 10, TR: 20},
		{W: 1, T0: 5, TG: 25, TR: 35},
		{W: 1, T0: 36, TG: 40, TR: 50},
		{W: 0, T0: 30, TG: 45, TR: 55},
	}
	var r ContendedResult
	analyse(&r, recs, 2, 0, 100)
	if r.Grants != 4 || r.Overlaps != 1 || r.Barging != 1 {
		t.Fatalf("grants %d overlaps %d barging %d", r.Grants, r.Overlaps, r.Barging)
	}
	if r.GapP50us != 0.005 || r.WaitMaxus != 0.02 {
		t.Fatalf("gap p50 %v wait max %v", r.GapP50us, r.WaitMaxus)
	}
}

func TestUserArgs(t *testing.T) {
	got := userArgs([]string{"-redis", "127.0.0.1:1", "-etcd=http://x", "-etcd-pid", "9", "-out", "results", "-contended-dur", "3s", "--cpuprofile=/tmp/p"})
	if len(got) != 2 || got[0] != "-contended-dur" || got[1] != "3s" {
		t.Fatalf("%q", got)
	}
}
