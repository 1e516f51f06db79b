package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"time"
)

// KindResult is one peer in the semaphore or the read-write lock rows.
type KindResult struct {
	Peer     string  `json:"peer"`
	Kind     string  `json:"kind"` // "semaphore" or "rwmutex"
	Workers  int     `json:"workers"`
	Clients  int     `json:"clients"`       // one client (connection pool; for fairlock one Locker) per worker
	Conns    int64   `json:"conns_dialled"` // connections those clients opened, warm-up included (pool and pub/sub)
	Capacity int     `json:"capacity,omitempty"`
	ReadPct  int     `json:"read_pct,omitempty"`
	Seed     uint64  `json:"seed,omitempty"`
	HoldMs   float64 `json:"hold_ms"`
	grantFigures
	Readers *grantFigures `json:"readers,omitempty"`
	Writers *grantFigures `json:"writers,omitempty"`
	// The weighted row: the big worker's grants (worker 0, BigPermits
	// permits each) and the small workers' (1 permit each).
	BigPermits int           `json:"big_permits,omitempty"`
	Big        *grantFigures `json:"big,omitempty"`
	Small      *grantFigures `json:"small,omitempty"`
	// SmallMeanGrants is a small worker's mean grants in the window.
	SmallMeanGrants float64 `json:"small_mean_grants,omitempty"`
	// Tenants are the tenants row's figures per tenant; Groups tells
	// whether the requests named their tenant (fairlock.WithGroup).
	Tenants []TenantFigures `json:"tenants,omitempty"`
	Groups  bool            `json:"groups,omitempty"`
	// ShareBucketMs is the width of the time buckets of the tenants'
	// GrantsPerBucket.
	ShareBucketMs float64 `json:"share_bucket_ms,omitempty"`
	// Lanes are the priority-lanes row's figures of its batch and its
	// interactive workers.
	Lanes *LaneFigures `json:"lanes,omitempty"`
	// WriterGapP50us is the median time from the last release before a
	// writer's grant to that grant: a writer's hand-off.
	WriterGapP50us float64 `json:"writer_gap_p50_us,omitempty"`
	// InUse is the semaphore's permits held × time over capacity × window,
	// from the grant-to-release intervals the clients recorded.
	InUse float64 `json:"in_use,omitempty"`
	// OverCapacity counts grants that took the permits held above the
	// capacity (a read-write lock: a writer with anyone, or anyone with a
	// writer), by the recorded intervals; OverCapacityAtomic by a counter
	// the workers share.
	OverCapacity       int64 `json:"over_capacity"`
	OverCapacityAtomic int64 `json:"over_capacity_atomic"`
	// The grants that broke FIFO order, of those that could (see brokeOrder),
	// and of them the readers that passed a waiting writer.
	OrderBy      string `json:"order_by"` // "fence" or "grant time"
	OrderChecked int    `json:"order_checked"`
	OrderBroken  int    `json:"order_broken"`
	PassedWriter int    `json:"readers_passed_writer"`
	grantCost
	Errors int64 `json:"errors"`
	runDetail
}

// runSemaphore: workers, each on its own client, take 1 of capacity permits
// of one semaphore, hold them, release, and again.
func runSemaphore(p peer, e *env, mon *monitor, capacity, workers int, hold, dur time.Duration) KindResult {
	r := KindResult{Peer: p.Name, Kind: "semaphore", Workers: workers, Clients: workers, Capacity: capacity, HoldMs: hold.Seconds() * 1e3}
	run := runKind(&r, p, semaphoreAsPeer(p, capacity), e, mon, int64(capacity), hold, dur, func(id int, w kindWorker) cycle {
		return func(ctx context.Context) (taken, error) { return w.Semaphore(ctx, "sem", capacity, 1) }
	})
	if run.recs != nil {
		_, permitTime := figures(run.recs, workers, run.startAt, run.endAt, nil)
		r.InUse = float64(permitTime) / float64(int64(capacity)*(run.endAt-run.startAt))
	}
	return r
}

// runWeighted: workers, each on its own client, take permits of one
// semaphore of capacity, worker 0 big permits a request and the others 1,
// hold them, release, and again.
func runWeighted(p peer, e *env, mon *monitor, capacity, workers, big int, hold, dur time.Duration) KindResult {
	r := KindResult{Peer: p.Name, Kind: "weighted", Workers: workers, Clients: workers, Capacity: capacity, HoldMs: hold.Seconds() * 1e3, BigPermits: big}
	run := runKind(&r, p, semaphoreAsPeer(p, capacity), e, mon, int64(capacity), hold, dur, func(id int, w kindWorker) cycle {
		n := 1
		if id == 0 {
			n = big
		}
		return func(ctx context.Context) (taken, error) { return w.Semaphore(ctx, "weighted", capacity, n) }
	})
	if run.recs == nil {
		return r
	}
	_, permitTime := figures(run.recs, workers, run.startAt, run.endAt, nil)
	r.InUse = float64(permitTime) / float64(int64(capacity)*(run.endAt-run.startAt))
	bigF, _ := figures(run.recs, workers, run.startAt, run.endAt, func(x rec) bool { return x.W == 0 })
	smallF, _ := figures(run.recs, workers, run.startAt, run.endAt, func(x rec) bool { return x.W != 0 })
	r.Big, r.Small = &bigF, &smallF
	if workers > 1 {
		r.SmallMeanGrants = float64(smallF.Grants) / float64(workers-1)
	}
	return r
}

// TenantFigures are one tenant's grants in the tenants row.
type TenantFigures struct {
	Name    string `json:"name"`
	Workers int    `json:"workers"`
	Weight  int    `json:"weight,omitempty"` // its group's weight, in the weighted tenants row
	grantFigures
	// Share is its part of all grants in the window; FairShare its part
	// under a split by weight (1/tenants without weights).
	Share     float64 `json:"share"`
	FairShare float64 `json:"fair_share"`
	// GrantsPerBucket are its grants in each of the row's ShareBucketMs
	// buckets of the window, in order: its share over time.
	GrantsPerBucket []int `json:"grants_per_bucket,omitempty"`
}

// tenantNames names the tenants A, B, C, ...
func tenantNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = string(rune('A' + i%26))
		if i >= 26 {
			names[i] += strconv.Itoa(i / 26)
		}
	}
	return names
}

// runTenants: workers in tenants (layout: the workers of each), each on
// its own client, take 1 permit of one semaphore of capacity, hold it,
// release, and again. With groups, each request names its tenant
// (fairlock.WithGroup), so that the permits are shared fairly between
// tenants rather than between requests, and with weights (one per tenant)
// weighs it; row names the row.
func runTenants(p peer, row string, groups bool, weights []int, e *env, mon *monitor, capacity int, layout []int, hold, dur time.Duration) KindResult {
	workers := 0
	for _, n := range layout {
		workers += n
	}
	r := KindResult{Peer: row, Kind: "tenants", Workers: workers, Clients: workers, Capacity: capacity, HoldMs: hold.Seconds() * 1e3, Groups: groups}
	names := tenantNames(len(layout))
	tenantOf := make([]int, 0, workers)
	for t, n := range layout {
		for range n {
			tenantOf = append(tenantOf, t)
		}
	}
	name := "tenants"
	if groups {
		name = "tenants-groups"
	}
	weightOf, _ := weightsOf(layout, weights)
	noGroups := false
	run := runKind(&r, p, semaphoreAsPeer(p, capacity), e, mon, int64(capacity), hold, dur, func(id int, w kindWorker) cycle {
		tenant, weight := names[tenantOf[id]], weightOf(tenantOf[id])
		if g, ok := w.(groupSemaphore); ok && groups {
			return func(ctx context.Context) (taken, error) {
				return g.SemaphoreGroup(ctx, name, capacity, 1, tenant, weight)
			}
		}
		noGroups = noGroups || groups
		return func(ctx context.Context) (taken, error) { return w.Semaphore(ctx, name, capacity, 1) }
	})
	if run.recs == nil {
		return r
	}
	if noGroups {
		r.Note, r.Groups = "the peer has no groups: FIFO", false
	}
	_, permitTime := figures(run.recs, workers, run.startAt, run.endAt, nil)
	r.InUse = float64(permitTime) / float64(int64(capacity)*(run.endAt-run.startAt))
	tenantRowFigures(&r, run, layout, tenantOf, weights)
	return r
}

// weightsOf is each tenant's weight (1 each without weights) and their
// sum.
func weightsOf(layout, weights []int) (weightOf func(int) int, sum int) {
	if weights == nil {
		return func(int) int { return 1 }, len(layout)
	}
	for t := range layout {
		sum += weights[t]
	}
	return func(t int) int { return weights[t] }, sum
}

// tenantRowFigures fills a tenants row's figures of each tenant from the
// row's run: its grants, its share and fair share, and its grants in each
// time bucket of the window, which the shares plot draws.
func tenantRowFigures(r *KindResult, run kindRun, layout, tenantOf, weights []int) {
	names := tenantNames(len(layout))
	weightOf, sumWeights := weightsOf(layout, weights)
	tenantIn := func(x rec) int {
		if x.W < len(tenantOf) {
			return tenantOf[x.W]
		}
		return -1
	}
	perBucket := grantsPerBucket(run.recs, run.startAt, run.endAt, shareBuckets, len(layout), tenantIn)
	r.ShareBucketMs = float64(run.endAt-run.startAt) / shareBuckets / 1e6
	for t, n := range layout {
		f, _ := figures(run.recs, r.Workers, run.startAt, run.endAt, func(x rec) bool { return tenantIn(x) == t })
		tf := TenantFigures{Name: names[t], Workers: n, grantFigures: f, FairShare: float64(weightOf(t)) / float64(sumWeights), GrantsPerBucket: perBucket[t]}
		if weights != nil {
			tf.Weight = weights[t]
		}
		if r.Grants > 0 {
			tf.Share = float64(f.Grants) / float64(r.Grants)
		}
		r.Tenants = append(r.Tenants, tf)
	}
}

// runRW: workers, each on its own client, take one read-write lock, each
// cycle a reader with probability readPct % and else a writer, drawn from
// a generator seeded with seed and the worker's number.
func runRW(p peer, e *env, mon *monitor, workers, readPct int, seed uint64, hold, dur time.Duration) KindResult {
	r := KindResult{Peer: p.Name, Kind: "rwmutex", Workers: workers, Clients: workers, ReadPct: readPct, Seed: seed, HoldMs: hold.Seconds() * 1e3}
	// A writer weighs as much as all the workers together: any other
	// holder beside it exceeds the capacity, readers alone never do.
	all := int64(workers)
	run := runKind(&r, p, rwAsPeer(p), e, mon, all, hold, dur, func(id int, w kindWorker) cycle {
		rng := rand.New(rand.NewPCG(seed, uint64(id)))
		return func(ctx context.Context) (taken, error) {
			write := rng.IntN(100) >= readPct
			t, err := w.RWLock(ctx, "rw", write)
			if write {
				t.n = workers
			}
			return t, err
		}
	})
	if run.recs == nil {
		return r
	}
	readers, _ := figures(run.recs, workers, run.startAt, run.endAt, func(x rec) bool { return !x.Write })
	writers, _ := figures(run.recs, workers, run.startAt, run.endAt, func(x rec) bool { return x.Write })
	r.Readers, r.Writers = &readers, &writers
	r.WriterGapP50us = us(percentile(releaseGaps(run.recs, run.startAt, run.endAt, func(x rec) bool { return x.Write }), 50))
	return r
}

// kindRun is a kind row's grant records, in grant order, and its window.
type kindRun struct {
	recs           []rec
	startAt, endAt int64
}

// runKind runs one cycle per worker of a set of p's kind workers, warmed by
// asPeer's Lock, for dur, and fills what every kind row measures. Its
// records are nil if the set could not be made.
func runKind(r *KindResult, p, asPeer peer, e *env, mon *monitor, capacity int64, hold, dur time.Duration, cycleOf func(id int, w kindWorker) cycle) kindRun {
	set, err := newWorkerSet(asPeer, e, r.Workers)
	if err != nil {
		r.Note = "setup: " + err.Error()
		return kindRun{}
	}
	defer set.close()
	cycles := make([]cycle, len(set.ws))
	for i, w := range set.ws {
		cycles[i] = cycleOf(i, kindOf(w))
	}
	out, sd, startAt, endAt := measureLoops(set, mon, &r.runDetail, cycles, hold, dur, capacity)
	r.Conns = set.c.dials.Load()
	recs := out.Recs
	sort.Slice(recs, func(i, j int) bool { return recs[i].TG < recs[j].TG })
	r.grantFigures, _ = figures(recs, r.Workers, startAt, endAt, nil)
	r.OverCapacity = overCapacity(recs, capacity, startAt, endAt)
	r.OverCapacityAtomic = out.Overlaps
	r.OrderBy = "grant time"
	if len(recs) > 0 && recs[0].Fence != 0 {
		r.OrderBy = "fence"
	}
	r.OrderChecked, r.OrderBroken, r.PassedWriter = brokeOrder(recs, r.Workers, startAt, endAt, nil)
	r.Errors = out.Errors
	if out.FirstErr != "" {
		r.Note = "first error: " + out.FirstErr
	}
	perGrant(&r.grantCost, &r.runDetail, r.GrantsTotal, out.Counts, sd, p.Redis)
	return kindRun{recs, startAt, endAt}
}

// brokeOrder counts the grants in the window that broke FIFO order: a
// request of another worker, known to be waiting (its TQ) before this one
// was called, was granted after it. Grant order is fence order where the
// peer gives fences (exact: Redis's own order), else grant time on the
// client. checked counts the grants that had such an earlier waiter, the
// only ones that could break the order; passedWriter, the readers that
// broke it against a writer. keep selects the grants counted, nil for all;
// the earlier waiters are any worker's. recs must be in grant order.
func brokeOrder(recs []rec, workers int, startAt, endAt int64, keep func(rec) bool) (checked, broken, passedWriter int) {
	byW := make([][]rec, workers)
	for _, x := range recs {
		if x.W < workers {
			byW[x.W] = append(byW[x.W], x)
		}
	}
	for _, b := range recs {
		if b.TG < startAt || b.TG > endAt || keep != nil && !keep(b) {
			continue
		}
		var earlier, late, lateWriter bool
		for o := range byW {
			if o == b.W {
				continue
			}
			a := pending(byW[o], b.T0)
			if a == nil || a.TQ == 0 || a.TQ >= b.T0 {
				continue
			}
			earlier = true
			if grantedAfter(a, &b) {
				late = true
				lateWriter = lateWriter || a.Write && !b.Write
			}
		}
		if earlier {
			checked++
		}
		if late {
			broken++
		}
		if lateWriter {
			passedWriter++
		}
	}
	return checked, broken, passedWriter
}

func grantedAfter(a, b *rec) bool {
	if a.Fence != 0 && b.Fence != 0 {
		return a.Fence > b.Fence
	}
	return a.TG > b.TG
}

// releaseGaps are, for each grant in the window that keep selects (nil:
// all), the time from the last release before it to the grant: its
// hand-off. recs must be in grant order.
func releaseGaps(recs []rec, startAt, endAt int64, keep func(rec) bool) []int64 {
	trs := make([]int64, 0, len(recs))
	for _, x := range recs {
		trs = append(trs, x.TR)
	}
	sort.Slice(trs, func(i, j int) bool { return trs[i] < trs[j] })
	var gaps []int64
	for _, x := range recs {
		if keep != nil && !keep(x) || x.TG < startAt || x.TG > endAt {
			continue
		}
		if i := sort.Search(len(trs), func(i int) bool { return trs[i] > x.TG }) - 1; i >= 0 {
			gaps = append(gaps, x.TG-trs[i])
		}
	}
	return gaps
}

// runSemaphoreDrain is runScale on one semaphore of capacity permits:
// waiters of 1 permit queue behind one holder of all of them, which then
// releases. A case of fewer than minGrants waiters runs in rounds until it
// has made that many grants, so that its cost per grant is not the fixed
// cost of its run (connections, the monitor's calls, a Redis gone cold).
func runSemaphoreDrain(p peer, e *env, mon *monitor, capacity, waiters, minGrants int) ScaleResult {
	rounds := (minGrants + waiters - 1) / waiters
	hold := func(ctx context.Context, holder worker, name string) (unlockFunc, error) {
		t, err := kindOf(holder).Semaphore(ctx, name, capacity, capacity)
		return t.unlock, err
	}
	r := runScale(semaphoreAsPeer(p, capacity), e, mon, 1, waiters, rounds, hold, fmt.Sprintf("1x%d", waiters))
	r.Capacity = capacity
	return r
}
