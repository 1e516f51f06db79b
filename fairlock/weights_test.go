package fairlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/fairlock/fairlocktest"
	"github.com/fairlock/fairlock/internal/redistest"
)

// Tests of group weights (WithGroupWeight): shares of permit-time in
// proportion to the weights, at any capacity, whatever the holds, within
// the group limit; no credit banked by a group that was away.

// The weights tests run many workers for seconds: on a machine as loaded
// as CI's, a 1 s lease can rightly be lost (a CI run lost one, and its
// Release failed), and a 600 ms waiter TTL lapse. So can a grant made on
// a waiter's behalf, which lives by its waiter TTL until the Locker's next
// heartbeat takes it up: with 3 s, a CI run with -race and a core kept
// busy lost one (its Release found it gone). Their Lockers take 10 s for
// both, but where a test needs the scan's charges often (its period is a
// heartbeat, a third of the shorter TTL).
const loadLeaseTTL, loadWaiterTTL = 10 * time.Second, 10 * time.Second

func loadLocker(t *testing.T, srv *redistest.Server) *fairlock.Locker {
	return newLocker(t, srv.Client(t), fairlock.WithLeaseTTL(loadLeaseTTL), fairlock.WithWaiterTTL(loadWaiterTTL))
}

// shareOff is how far, as a fraction of want, the share part/total is from
// want.
func shareOff(part, total, want float64) float64 {
	if total == 0 {
		return 1
	}
	d := part/total/want - 1
	if d < 0 {
		return -d
	}
	return d
}

// 4 backlogged tenants with weights 1, 2, 3 and 4, 12 workers each taking
// 1 permit for 5 ms: each tenant's share of the permit-time (from Acquire's
// return to Release's return) is within 10% of 10, 20, 30 and 40%, on 8
// permits (which do not divide among the weights: the holdings 0.8, 1.6,
// 2.4 and 3.2 are met on average) and on 1. The shape (6 workers,
// 1 ms, grants) is bench row 6d, within 4% on a quiet machine. Here the
// test must hold on one as loaded as CI's, where each step away from that
// shape answers a failure CI measured: shares of grants (17.5% off while
// permit-time was 5% off: a 1 ms hold is not 1 ms there, and the rule
// shares permit-time); too few grants (62 for the lightest tenant in 5 s,
// 10.2% off: Redis counts a hold from its grant, the test from Acquire's
// return, and each wake-up is noise), so it runs 5 s more at a time, at
// most 20 s, until the lightest tenant has 200; 6 workers (the weight-4
// tenant lost its backlog, 8.9% off; the rule shares among the groups
// that wait); 1 ms holds (a stall of a few ms in a few of the lightest
// tenant's holds, 14.1% off). With 5 ms, 12 workers and two busy loops
// beside: 1.0% and 3.3% off.
func TestGroupWeightsShare(t *testing.T) {
	t.Parallel()
	// Parallel subtests, not redistest.SideBySide: they start after the
	// package's first tests, which start servers and state machines at
	// once. Started among those, capacity 8 went 10.6% off.
	for _, capacity := range []int{8, 1} {
		t.Run(fmt.Sprint("capacity ", capacity), func(t *testing.T) {
			t.Parallel()
			testGroupWeightsShare(t, capacity)
		})
	}
}

// testGroupWeightsShare is TestGroupWeightsShare on a semaphore of
// capacity permits.
func testGroupWeightsShare(t *testing.T, capacity int) {
	srv := redistest.Start(t)
	const run, maxRun, minGrants, workers, holdFor = 5 * time.Second, 20 * time.Second, 200, 12, 5 * time.Millisecond
	ctx := withTimeout(t, maxRun+30*time.Second)
	name := fmt.Sprintf("weights%d", capacity)
	var parties []groupParty
	for w := 1; w <= 4; w++ {
		parties = append(parties, groupParty{group: fmt.Sprintf("tenant-w%d", w),
			sem: mustSem(t, loadLocker(t, srv), name, capacity), workers: workers, weight: w})
	}
	grants, used := make([]int64, len(parties)), make([]time.Duration, len(parties))
	for elapsed := time.Duration(0); elapsed < maxRun && (elapsed == 0 || grants[0] < minGrants); elapsed += run {
		g, u := groupLoop(t, ctx, parties, run, holdFor)
		for i := range g {
			grants[i], used[i] = grants[i]+g[i], used[i]+u[i]
		}
	}
	var total int64
	var totalUsed time.Duration
	for i, n := range grants {
		total, totalUsed = total+n, totalUsed+used[i]
	}
	shares, timeShares, worst := make([]string, len(grants)), make([]string, len(grants)), 0.0
	for i, n := range grants {
		worst = max(worst, shareOff(float64(used[i]), float64(totalUsed), float64(i+1)/10))
		shares[i] = fmt.Sprintf("%.1f%%", 100*float64(n)/float64(total))
		timeShares[i] = fmt.Sprintf("%.1f%%", 100*float64(used[i])/float64(totalUsed))
	}
	t.Logf("capacity %d, weights 1:2:3:4, %d grants: %v; shares of permit-time %v, of grants %v; worst %.1f%% off its weight's share of permit-time",
		capacity, total, grants, timeShares, shares, 100*worst)
	if worst > 0.10 {
		t.Fatalf("shares of permit-time %v (of grants %v, %d in all): a tenant is %.1f%% off its weight's share, more than 10%%", timeShares, shares, total, 100*worst)
	}
}

// Equal weights, tenant L holding each permit 4 times as long as tenant S,
// both backlogged on 4 permits: each gets half the permit-time, within 15%,
// so L gets about a quarter of S's grants.
func TestGroupWeightsLongHolds(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const run = 5 * time.Second
	ctx := withTimeout(t, run+30*time.Second)
	sem := func() *fairlock.Semaphore { return mustSem(t, loadLocker(t, srv), "longholds", 4) }
	parties := []groupParty{
		{group: "tenant-s", sem: sem(), workers: 6, holdFor: 2 * time.Millisecond},
		{group: "tenant-l", sem: sem(), workers: 6, holdFor: 8 * time.Millisecond},
	}
	grants, used := groupLoop(t, ctx, parties, run, 0)
	total := float64(used[0] + used[1])
	off := max(shareOff(float64(used[0]), total, 0.5), shareOff(float64(used[1]), total, 0.5))
	t.Logf("holds 2 ms and 8 ms on 4 permits: grants %v, permit-time %v, %.1f%% off an equal share", grants, used, 100*off)
	if off > 0.15 {
		t.Fatalf("permit-time %v (grants %v): %.1f%% off an equal share, more than 15%%", used, grants, 100*off)
	}
}

// A hold counts while it lasts, not only once it ends: tenant-a holds one
// of 2 permits throughout, and its short jobs and tenant-b's share the
// other. Its long hold is charged at each scan (a heartbeat), so tenant-b,
// whose jobs have used no more than that, gets at least 75% of the short
// grants: a charge only at release would split them evenly.
func TestGroupWeightsOngoingHold(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const run, holdFor = 2 * time.Second, 2 * time.Millisecond
	ctx := withTimeout(t, run+30*time.Second)
	sem := func() *fairlock.Semaphore {
		return mustSem(t, newLocker(t, srv.Client(t), fairlock.WithLeaseTTL(loadLeaseTTL)), "ongoing", 2)
	}
	semA := sem()
	long := hold(t, groupPermits(semA, 1, "tenant-a"))
	grants, _ := groupLoop(t, ctx, []groupParty{{group: "tenant-a", sem: semA, workers: 3}, {group: "tenant-b", sem: sem(), workers: 3}}, run, holdFor)
	released(t, long)
	share := float64(grants[1]) / float64(grants[0]+grants[1])
	t.Logf("tenant-a holding 1 of 2 permits for %v: short grants tenant-a %d, tenant-b %d (%.1f%%)", run, grants[0], grants[1], 100*share)
	if share < 0.75 {
		t.Fatalf("tenant-b got %.1f%% of the short grants (a %d, b %d): tenant-a's long hold was not charged while it lasted", 100*share, grants[0], grants[1])
	}
}

// A heavy group still holds no more than the group limit, and a light one
// is still served.
func TestGroupWeightsWithinLimit(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const capacity, limit, run, holdFor = 4, 2, 2 * time.Second, time.Millisecond
	ctx := withTimeout(t, run+30*time.Second)
	var most [2]atomic.Int64
	var grants [2]atomic.Int64
	runCtx, stop := context.WithTimeout(ctx, run)
	defer stop()
	var wg sync.WaitGroup
	for i, p := range []struct {
		group  string
		weight int
	}{{"tenant-heavy", 10}, {"tenant-light", 1}} {
		sem := groupSem(t, loadLocker(t, srv), "weightlimit", capacity, limit)
		var holding atomic.Int64
		for range 4 {
			wg.Go(func() {
				for runCtx.Err() == nil {
					lease, err := sem.Acquire(runCtx, 1, fairlock.WithGroup(p.group), fairlock.WithGroupWeight(p.weight))
					if err != nil {
						if runCtx.Err() == nil {
							t.Error(err)
						}
						return
					}
					n := holding.Add(1)
					for m := most[i].Load(); n > m && !most[i].CompareAndSwap(m, n); m = most[i].Load() {
					}
					grants[i].Add(1)
					time.Sleep(holdFor)
					holding.Add(-1)
					released(t, lease)
				}
			})
		}
	}
	wg.Wait()
	t.Logf("limit %d of %d permits, weights 10 and 1: heavy %d grants, at most %d held; light %d grants, at most %d held",
		limit, capacity, grants[0].Load(), most[0].Load(), grants[1].Load(), most[1].Load())
	// A holder counts itself before its release, so the count is at most
	// the limit; a release may reach Redis before the count drops, which
	// only lowers it.
	if most[0].Load() > limit || most[1].Load() > limit {
		t.Fatalf("a group held more than its limit of %d: heavy %d, light %d", limit, most[0].Load(), most[1].Load())
	}
	if grants[1].Load() == 0 {
		t.Fatal("the light group was never served")
	}
}

// A group that was away comes back at the clock of the groups that waited:
// it does not get the permits for as long as it was away. Tenant A runs
// alone for 1 s, then B, with equal weight and holds, joins: over the next
// second B's share of the grants is between 30 and 70%. With the credit
// banked it is nearly all of them (97.7% of the permit-time in a run with
// new groups starting at clock 0); the bound is that wide because a
// second under CI's load holds about 90 grants a tenant. The share is of
// grants, not of the permit-time the test sees (grant to Release's
// return): under -race with a core busy, tenant-a's holds measured 20 ms
// against tenant-b's 9 ms, for holds of 2 ms each, and tenant-b's share
// of that time 29% with 51 grants against 58.
func TestGroupWeightsNoBankedCredit(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const capacity, holdFor = 2, 2 * time.Millisecond
	ctx := withTimeout(t, 30*time.Second)
	var counting atomic.Bool
	var grants, held [2]atomic.Int64
	var wg sync.WaitGroup
	work := func(i int, group string, runCtx context.Context) {
		sem := mustSem(t, loadLocker(t, srv), "banked", capacity)
		for range 4 {
			wg.Go(func() {
				for runCtx.Err() == nil {
					lease, err := sem.Acquire(runCtx, 1, fairlock.WithGroup(group))
					if err != nil {
						if runCtx.Err() == nil {
							t.Error(err)
						}
						return
					}
					granted, counted := time.Now(), counting.Load()
					time.Sleep(holdFor)
					released(t, lease)
					if counted {
						grants[i].Add(1)
						held[i].Add(int64(time.Since(granted)))
					}
				}
			})
		}
	}
	runCtx, stop := context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	work(0, "tenant-a", runCtx)
	time.Sleep(time.Second)
	counting.Store(true)
	work(1, "tenant-b", runCtx)
	wg.Wait()
	a, b := time.Duration(held[0].Load()), time.Duration(held[1].Load())
	ga, gb := grants[0].Load(), grants[1].Load()
	share := float64(gb) / float64(ga+gb)
	t.Logf("after tenant-a ran alone for 1 s: tenant-a held %v in %d grants, tenant-b %v in %d: tenant-b's share of the grants %.1f%%, of the time %.1f%%",
		a, ga, b, gb, 100*share, 100*float64(b)/float64(a+b))
	if share < 0.3 || share > 0.7 {
		t.Fatalf("once tenant-b joined, it had %d grants and tenant-a %d: tenant-b's share %.1f%%, outside 30-70%%", gb, ga, 100*share)
	}
}

// WithGroupWeight is refused at once, before any Redis call, outside
// 1..MaxGroupWeight, without WithGroup, and on the mutex and the
// read-write lock; Inspect shows each party's group weight, the one its
// group's most recent request named; events carry the request's.
func TestGroupWeightsInput(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	rec := fairlocktest.NewRecorder()
	l := newLocker(t, srv.Client(t), rec.Option())
	sem := mustSem(t, l, "weighin", 2)
	for _, c := range []struct {
		what string
		opts []fairlock.AcquireOption
	}{
		{"weight 0", []fairlock.AcquireOption{fairlock.WithGroup("a"), fairlock.WithGroupWeight(0)}},
		{"weight -1", []fairlock.AcquireOption{fairlock.WithGroup("a"), fairlock.WithGroupWeight(-1)}},
		{"weight above the most", []fairlock.AcquireOption{fairlock.WithGroup("a"), fairlock.WithGroupWeight(fairlock.MaxGroupWeight + 1)}},
		{"no group", []fairlock.AcquireOption{fairlock.WithGroupWeight(2)}},
	} {
		if _, err := sem.Acquire(ctx, 1, c.opts...); !errors.Is(err, fairlock.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.what, err)
		}
		if _, err := sem.TryAcquire(ctx, 1, c.opts...); !errors.Is(err, fairlock.ErrInvalid) {
			t.Errorf("TryAcquire, %s: %v, want ErrInvalid", c.what, err)
		}
	}
	mu, err := l.Mutex("weighin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mu.Acquire(ctx, fairlock.WithGroupWeight(2)); !errors.Is(err, fairlock.ErrInvalid) {
		t.Errorf("mutex with a weight: %v, want ErrInvalid", err)
	}
	if st, err := sem.Inspect(ctx); err != nil || st.Held() || st.Queued != 0 {
		t.Fatalf("a refused call left something in Redis: %+v, %v", st, err)
	}

	a := hold(t, func(ctx context.Context, opts ...fairlock.AcquireOption) (*fairlock.Lease, error) {
		return sem.Acquire(ctx, 2, append(opts, fairlock.WithGroup("tenant-a"), fairlock.WithGroupWeight(3))...)
	})
	w := queueFor(t, ctx, func(ctx context.Context, opts ...fairlock.AcquireOption) (*fairlock.Lease, error) {
		return sem.Acquire(ctx, 1, append(opts, fairlock.WithGroup("tenant-a"), fairlock.WithGroupWeight(5))...)
	})
	p := queueFor(t, ctx, permits(sem, 1))
	st, err := sem.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != 1 || st.Holders[0].Weight != 5 || len(st.Waiters) != 2 || st.Waiters[0].Weight != 5 || st.Waiters[1].Weight != 1 {
		t.Fatalf("Inspect: %+v; want tenant-a's holder and waiter of weight 5 (its latest request's), the ungrouped waiter 1", st)
	}
	released(t, a)
	released(t, mustGrant(t, w))
	released(t, mustGrant(t, p))
	weights := map[string]int{}
	for _, e := range waitEvents(t, rec, "weighin", fairlock.EventReleased, 3) {
		weights[e.Token] = e.Weight
	}
	if weights[a.Token()] != 3 || weights[st.Waiters[0].Token] != 5 || weights[st.Waiters[1].Token] != 0 {
		t.Errorf("EventReleased weights by token %v: want tenant-a's 3 and 5, the ungrouped 0", weights)
	}
}

// mustGrant is the lease a queued call got, within slack.
func mustGrant(t *testing.T, ch <-chan result) *fairlock.Lease {
	t.Helper()
	lease, _ := await(t, ch, handoff)
	return lease
}
