package main

import (
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

func TestWaitHist(t *testing.T) {
	// 12 µs and 15 µs fall in buckets 21 and 23 (20 a decade from 1 µs),
	// 150 µs in 43, 1.5 ms in 63; a wait under 1 µs in bucket 0.
	h := newWaitHist([]int64{12e3, 15e3, 150e3, 1500e3})
	if h.First != 21 || len(h.Counts) != 63-21+1 || h.Counts[0] != 1 || h.Counts[2] != 1 || h.Counts[22] != 1 || h.Counts[42] != 1 || h.total() != 4 {
		t.Fatalf("hist %+v", h)
	}
	if z := newWaitHist([]int64{500}); z.First != 0 || len(z.Counts) != 1 {
		t.Fatalf("a wait under 1 µs: %+v", z)
	}
	if newWaitHist(nil) != nil {
		t.Fatal("no waits: want nil")
	}
	xs, fracs := h.ccdf()
	if len(xs) != len(h.Counts) || fracs[0] != 1 || math.Abs(xs[0]-h.edgeUs(0)) > 1e-9 {
		t.Fatalf("ccdf starts at (%v, %v)", xs[0], fracs[0])
	}
	// above the 15 µs bucket 2 of 4 waits are longer; above the 150 µs
	// bucket 1, up to the last bucket, whose upper edge (0) is left out
	for i, want := range map[int]float64{1: 0.75, 3: 0.5, 23: 0.25, 42: 0.25} {
		if fracs[i] != want {
			t.Errorf("ccdf at %.1f µs: %v, want %v", xs[i], fracs[i], want)
		}
	}
	if xs[1] <= 12 || xs[1] > 15 {
		t.Errorf("the 12 µs bucket's upper edge %.2f µs", xs[1])
	}
}

func TestGrantsPerBucket(t *testing.T) {
	// window 100-200 in 4 buckets of 25; worker 2 is no tenant's
	recs := []rec{{W: 0, TG: 100}, {W: 1, TG: 124}, {W: 0, TG: 125}, {W: 1, TG: 200}, {W: 0, TG: 99}, {W: 0, TG: 201}, {W: 2, TG: 150}}
	got := grantsPerBucket(recs, 100, 200, 4, 2, func(x rec) int {
		if x.W < 2 {
			return x.W
		}
		return -1
	})
	want := [][]int{{1, 1, 0, 0}, {1, 0, 0, 1}}
	for g := range want {
		for b := range want[g] {
			if got[g][b] != want[g][b] {
				t.Fatalf("grants per bucket %v, want %v", got, want)
			}
		}
	}
}

// syntheticResults are results of the four plotted scenarios, made up: a
// narrow distribution of waits for fairlock, long tails for the spinners,
// and tenants' shares that wobble around their figures.
func syntheticResults() *Results {
	rng := rand.New(rand.NewPCG(1, 2))
	waits := func(n int, ms func() float64) *WaitHist {
		ws := make([]int64, n)
		for i := range ws {
			ws[i] = int64(ms() * 1e6)
		}
		return newWaitHist(ws)
	}
	res := &Results{Meta: Meta{Date: "2026-12-05 00:00 UTC"}}
	for i, peer := range []string{"fairlock", "redislock", "redsync", "naive", "etcd"} {
		tail := 3 + 2*float64(i)
		res.Contended = append(res.Contended, ContendedResult{Peer: peer, Variant: "16x1", Procs: 1, Workers: 16, HoldMs: 1,
			grantFigures: grantFigures{DurationS: 10, WaitP99us: 25e3 + 20e3*float64(i)},
			WaitHist: waits(6000, func() float64 {
				return 15 + 2*rng.NormFloat64() + float64(min(i, 1))*tail*rng.ExpFloat64()*rng.ExpFloat64()
			})})
	}
	res.Contended = append(res.Contended, ContendedResult{Peer: "fairlock", Variant: "4x4", Procs: 4, WaitHist: waits(10, func() float64 { return 1 })})
	tenants := func(row string, layout, weights []int, shares []float64) KindResult {
		r := KindResult{Peer: row, Kind: "tenants", Capacity: 4, Workers: 16, HoldMs: 1, ShareBucketMs: 500}
		for i, s := range shares {
			tf := TenantFigures{Name: tenantNames(4)[i], Workers: layout[i], Share: s, FairShare: 0.25}
			if weights != nil {
				tf.Weight, tf.FairShare = weights[i], float64(weights[i])/10
			}
			for range shareBuckets {
				tf.GrantsPerBucket = append(tf.GrantsPerBucket, int(800*s*(1+0.1*rng.NormFloat64())))
			}
			r.Tenants = append(r.Tenants, tf)
		}
		return r
	}
	res.Tenants = []KindResult{
		tenants("fairlock (groups)", []int{13, 1, 1, 1}, nil, []float64{0.5, 0.166, 0.166, 0.166}),
		tenants("fairlock (FIFO)", []int{13, 1, 1, 1}, nil, []float64{0.81, 0.063, 0.063, 0.063}),
		tenants("naive", []int{13, 1, 1, 1}, nil, []float64{0.82, 0.06, 0.06, 0.06}),
	}
	res.WeightedTenants = []KindResult{
		tenants("fairlock (weights)", []int{6, 6, 6, 6}, []int{1, 2, 3, 4}, []float64{0.1, 0.2, 0.3, 0.4}),
		tenants("fairlock (groups)", []int{6, 6, 6, 6}, nil, []float64{0.25, 0.25, 0.25, 0.25}),
	}
	lanes := func(row string, priorities bool, interactive float64) KindResult {
		l := &LaneFigures{Priorities: priorities, BatchWorkers: 12, InteractiveWorkers: 2, PauseMs: 20,
			Interactive: grantFigures{WaitP99us: interactive * 3e3}, Batch: grantFigures{WaitP99us: 14e3},
			InteractiveWaits: waits(800, func() float64 { return interactive * rng.ExpFloat64() }),
			BatchWaits:       waits(8000, func() float64 { return 12 + rng.NormFloat64() })}
		return KindResult{Peer: row, Kind: "priority-lanes", Capacity: 2, HoldMs: 1, grantFigures: grantFigures{DurationS: 10, GrantsTotal: 1}, Lanes: l}
	}
	res.PriorityLanes = []KindResult{lanes("fairlock (priorities)", true, 1), lanes("fairlock (FIFO)", false, 6)}
	return res
}

// TestDrawPlots draws every plot from synthetic results, checks each is a
// PNG of a few tens of KB, and that results without their scenarios
// remove them. BENCH_PLOT_DIR keeps the plots there, to look at.
func TestDrawPlots(t *testing.T) {
	dir := os.Getenv("BENCH_PLOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := drawPlots(dir, syntheticResults()); err != nil {
		t.Fatal(err)
	}
	for _, s := range plotSpecs {
		path := filepath.Join(dir, s.file)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", s.file, err)
		}
		st, _ := os.Stat(path)
		t.Logf("%s: %d×%d px, %d bytes", s.file, img.Bounds().Dx(), img.Bounds().Dy(), st.Size())
		if st.Size() > 120<<10 {
			t.Errorf("%s: %d bytes, want a few tens of KB", s.file, st.Size())
		}
	}
	if os.Getenv("BENCH_PLOT_DIR") != "" {
		return
	}
	if err := drawPlots(dir, &Results{}); err != nil {
		t.Fatal(err)
	}
	for _, s := range plotSpecs {
		if _, err := os.Stat(filepath.Join(dir, s.file)); !os.IsNotExist(err) {
			t.Errorf("%s left beside results without its scenario (%v)", s.file, err)
		}
	}
}
