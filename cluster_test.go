package fairlock_test

// Redis Cluster and Sentinel, on real local deployments started by
// internal/redistest: 3 primaries + 3 replicas via `redis-cli --cluster
// create`, and a primary + replica + 3 redis-sentinel processes. Every
// figure is printed with t.Logf (run with -v to see them).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/fairlock/fairlock/internal/transfers"
	"github.com/redis/go-redis/v9"
)

// Short TTLs keep failover tests fast: heartbeat = 1s/3.
var failoverLockerOpts = []fairlock.Option{
	fairlock.WithLeaseTTL(time.Second),
	fairlock.WithWaiterTTL(time.Second),
}

// attemptBound is the stated bound on one Acquire during a failover: the
// failover itself (node timeout 1.5 s + election ≤ 1.5 s for the cluster,
// down-after 1 s + election ≈ 1–2 s for Sentinel) plus a waiter TTL and two
// heartbeats, rounded up generously for a shared 2-core machine with -race.
const attemptBound = 12 * time.Second

func clusterClientOptions() *redis.ClusterOptions {
	return &redis.ClusterOptions{
		DialTimeout:  500 * time.Millisecond,
		ReadTimeout:  time.Second,
		WriteTimeout: time.Second,
		PoolSize:     16,
	}
}

func newLockers(t *testing.T, n int, client func() redis.UniversalClient, opts ...fairlock.Option) []*fairlock.Locker {
	t.Helper()
	out := make([]*fairlock.Locker, n)
	for i := range out {
		l, err := fairlock.New(client(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		out[i] = l
	}
	return out
}

// TestCluster runs the core behaviours against a 3-primary/3-replica
// Redis Cluster through redis.NewClusterClient.
func TestCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	t0 := time.Now()
	c := redistest.StartCluster(t)
	t.Logf("cluster of 6 nodes up and healthy in %v: primaries %v", time.Since(t0).Round(time.Millisecond), addrs(c.Primaries(t)))
	client := func() redis.UniversalClient { return c.Client(t, clusterClientOptions()) }

	t.Run("NoCrossSlot", func(t *testing.T) { testNoCrossSlot(t, client) })
	t.Run("FIFO", func(t *testing.T) { testClusterFIFO(t, client) })
	t.Run("MutualExclusion", func(t *testing.T) { testClusterExclusion(t, client) })
	t.Run("PubSubConnections", func(t *testing.T) { testPubSubConnections(t, c, client) })
	t.Run("NotifyFanOut", func(t *testing.T) { testNotifyFanOut(t, c, client) })
	t.Run("PubSubKill", func(t *testing.T) { testPubSubKill(t, c, client) })
	t.Run("Spread", func(t *testing.T) { testSpread(t, c, client) })
	t.Run("Resharding", func(t *testing.T) { testResharding(t, c, client) })
	t.Run("Throughput", func(t *testing.T) { testThroughput(t, client) })
	t.Run("Priorities", func(t *testing.T) { testClusterPriorities(t, client) })
	t.Run("MultiMutex", func(t *testing.T) { testClusterMultiMutex(t, client) })
	t.Run("MultiMutexOneSlot", func(t *testing.T) { testClusterMultiMutexOneSlot(t, client) })
	t.Run("MultiMutexMixedSlots", func(t *testing.T) { testClusterMultiMutexMixedSlots(t, client) })
	t.Run("Election", func(t *testing.T) { testClusterElection(t, client) })
	for _, k := range []kind{semKind, rwKind} {
		t.Run(k.name+"/NoCrossSlot", func(t *testing.T) { testKindsNoCrossSlot(t, k, client) })
		t.Run(k.name+"/FIFOOverShards", func(t *testing.T) { testKindsFIFO(t, k, c, client) })
		t.Run(k.name+"/CapacityOverShards", func(t *testing.T) { testKindsCapacity(t, k, c, client) })
		t.Run(k.name+"/OneMessagePerLocker", func(t *testing.T) { testKindsOneMessage(t, k, c, client) })
	}
}

// testClusterMultiMutex: transfers between accounts whose names hash to
// different slots, each holding both accounts through a MultiMutex, named
// in random order, from 4 Lockers at once: every transfer finishes within
// its ctx (no deadlock across shards), no account is in two transfers at
// once, and the total is conserved.
func testClusterMultiMutex(t *testing.T, client func() redis.UniversalClient) {
	const accounts, lockers, workers = 6, 4, 2
	n := transfers.Run(t, newLockers(t, lockers, client), "mm-acct:", accounts, workers, 2*time.Second, 0)
	t.Logf("%d transfers across shards by %d Lockers x %d workers among %d accounts", n, lockers, workers, accounts)
}

// testClusterMultiMutexOneSlot: a MultiMutex of two names whose hash tags
// share a slot (found with CLUSTER KEYSLOT) is one request, as on one
// node: with both held, it joins both queues at once (taken in name order,
// it would join the second only once it held the first), and is granted
// both when they are released.
func testClusterMultiMutexOneSlot(t *testing.T, client func() redis.UniversalClient) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := slotMates(ctx, t, client(), "slot-mate-")
	ls := newLockers(t, 2, client)
	var held []*fairlock.Lease
	for _, name := range []string{a, b} {
		lease, err := ls[0].Acquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, lease)
	}
	m, err := ls[1].MultiMutex(a, b)
	if err != nil {
		t.Fatal(err)
	}
	queued, got := make(chan int, 2), make(chan *fairlock.MultiLease, 1)
	go func() {
		ml, err := m.Acquire(ctx, fairlock.OnQueued(func(int) { queued <- 1 }))
		if err != nil {
			t.Error(err)
		}
		got <- ml
	}()
	for range 2 {
		select {
		case <-queued:
		case <-time.After(5 * time.Second):
			t.Fatalf("the MultiMutex of %q and %q, in one slot, did not queue in both queues", a, b)
		}
	}
	for _, lease := range held {
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ml := <-got
	if ml == nil {
		t.FailNow()
	}
	if err := ml.Release(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%q and %q share a slot: queued in both at once, granted both", a, b)
}

// slotMates returns two names, prefix and a number, whose hash tags share
// a slot, found with CLUSTER KEYSLOT.
func slotMates(ctx context.Context, t *testing.T, c redis.UniversalClient, prefix string) (string, string) {
	t.Helper()
	bySlot := map[int64]string{}
	for i := range 10000 {
		name := fmt.Sprint(prefix, i)
		slot, err := c.ClusterKeySlot(ctx, "{"+name+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		if other, ok := bySlot[slot]; ok {
			return other, name
		}
		bySlot[slot] = name
	}
	t.Fatal("no two names share a slot")
	return "", ""
}

// testClusterMultiMutexMixedSlots: MultiMutexes that share two names of
// one slot, one of them with a third name in another slot, cannot
// deadlock. The wide one (y) waits for a held name of the pair; the
// narrow one (x) queues behind it. Were y to take the pair one name at a
// time while x queued in both at once, x would be granted the free name
// and wait for the other, held by y, which would queue for the free
// one behind x: each would hold what the other waits for, until its ctx
// ended. Both must be granted, in order.
func testClusterMultiMutexMixedSlots(t *testing.T, client func() redis.UniversalClient) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cc := client()
	a, b := slotMates(ctx, t, cc, "mixed-mate-")
	const c = "mixed-other"
	ls := newLockers(t, 3, client)
	held, err := ls[0].Acquire(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := ls[1].MultiMutex(c, b, a)
	if err != nil {
		t.Fatal(err)
	}
	x, err := ls[2].MultiMutex(b, a)
	if err != nil {
		t.Fatal(err)
	}
	type place struct {
		slot int64
		name string
	}
	var places []place
	for _, name := range y.Names() {
		slot, err := cc.ClusterKeySlot(ctx, "{"+name+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		places = append(places, place{slot, name})
	}
	if !slices.IsSortedFunc(places, func(p, q place) int { return cmp.Or(cmp.Compare(p.slot, q.slot), strings.Compare(p.name, q.name)) }) {
		t.Fatalf("Names() = %v, not by slot, then by name", places)
	}
	// Each waits at most 10 s: a deadlock ends in both ctx errors.
	acquired := make(chan string, 2)
	var wg sync.WaitGroup
	defer wg.Wait()
	take := func(who string, m *fairlock.MultiMutex, queued chan<- int) {
		wctx, stop := context.WithTimeout(ctx, 10*time.Second)
		defer stop()
		ml, err := m.Acquire(wctx, fairlock.OnQueued(func(int) { queued <- 1 }))
		if err != nil {
			t.Errorf("%s %v: %v", who, m.Names(), err)
			acquired <- ""
			return
		}
		acquired <- who
		if err := ml.Release(ctx); err != nil {
			t.Error(err)
		}
	}
	yQueued, xQueued := make(chan int, 3), make(chan int, 3)
	wg.Go(func() { take("y", y, yQueued) })
	awaitQueued(t, yQueued, "y")
	wg.Go(func() { take("x", x, xQueued) })
	awaitQueued(t, xQueued, "x")
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	order := []string{<-acquired, <-acquired}
	if !slices.Equal(order, []string{"y", "x"}) {
		t.Fatalf("granted in order %q, want y then x (%q and %q share a slot, %q does not)", order, a, b, c)
	}
	t.Logf("%v then %v, granted in order", y.Names(), x.Names())
}

// awaitQueued waits, at most 5 s, for a report of OnQueued on queued.
func awaitQueued(t *testing.T, queued <-chan int, who string) {
	t.Helper()
	select {
	case <-queued:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not queue within 5 s", who)
	}
}

// testClusterElection: elections of names on different shards, each with
// two candidates and an observer: the first leads, the second after its
// resignation, and the observer sees both values in order (its log and
// record share the name's slot with the lock's keys, so no CROSSSLOT).
func testClusterElection(t *testing.T, client func() redis.UniversalClient) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ls := newLockers(t, 3, client)
	for i := range 4 {
		name := fmt.Sprint("el-", i)
		var es []*fairlock.Election
		for _, l := range ls {
			e, err := l.Election(name)
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, e)
		}
		wctx, stop := context.WithCancel(ctx)
		seen := es[2].Observe(wctx)
		first, err := es[0].Campaign(ctx, "first")
		if err != nil {
			t.Fatal(err)
		}
		values := []string{(<-seen).Value}
		second := make(chan *fairlock.Term, 1)
		go func() {
			term, err := es[1].Campaign(ctx, "second")
			if err != nil {
				t.Error(err)
			}
			second <- term
		}()
		if err := first.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		term := <-second
		values = append(values, (<-seen).Value)
		stop()
		for range seen {
		}
		if !slices.Equal(values, []string{"first", "second"}) || term == nil || term.Epoch() <= first.Epoch() {
			t.Fatalf("%s: observed %v; epochs %d then %v", name, values, first.Epoch(), term)
		}
		if err := term.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// testClusterPriorities: a semaphore with groups and waiters of three
// priorities, on awkward names (prefixed: the other subtests use the
// names with other capacities), grants by priority and hits no CROSSSLOT:
// every lane's keys share the name's hash tag. Each grant is released
// before the test goes on, so nothing is left in use.
func testClusterPriorities(t *testing.T, client func() redis.UniversalClient) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ls := newLockers(t, 2, client)
	for _, awkward := range awkwardNames[:6] {
		name := "priorities " + awkward
		sems := make([]*fairlock.Semaphore, 2)
		for i, l := range ls {
			s, err := l.Semaphore(name, 1)
			if err != nil {
				t.Fatal(err)
			}
			sems[i] = s
		}
		held, err := sems[0].Acquire(ctx, 1)
		if err != nil {
			t.Fatalf("Acquire(%q): %v", name, err)
		}
		type grant struct {
			priority int
			fence    int64
		}
		got := make(chan grant, 3)
		for i, p := range []int{0, 9, 4} {
			opts := []fairlock.AcquireOption{fairlock.WithPriority(p)}
			if i < 2 {
				opts = append(opts, fairlock.WithGroup(fmt.Sprint("tenant-", i)))
			}
			go func() {
				lease, err := sems[1].Acquire(ctx, 1, opts...)
				if err != nil {
					t.Errorf("Acquire(%q) at priority %d: %v", name, p, err)
					got <- grant{p, 0}
					return
				}
				if err := lease.Release(ctx); err != nil {
					t.Errorf("Release(%q): %v", name, err)
				}
				got <- grant{p, lease.Fence()}
			}()
			waitKindWaiters(t, ls[0], semKind, name, i+1)
		}
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		grants := []grant{<-got, <-got, <-got}
		slices.SortFunc(grants, func(a, b grant) int { return cmp.Compare(a.fence, b.fence) })
		var order []int
		for _, g := range grants {
			order = append(order, g.priority)
		}
		if !slices.Equal(order, []int{9, 4, 0}) {
			t.Errorf("%q: granted priorities %v, want [9 4 0]", name, order)
		}
	}
}

func addrs(ss []*redistest.Server) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Addr
	}
	return out
}

// Names that break naive hash tags: braces, empty braces, colons, spaces,
// escapes that look like our own escaping, non-UTF-8.
var awkwardNames = []string{
	"{}", "{", "}", "}{", "{{}}", "a{b}c", "{a}{b}", "x:y:z", ":", "{x}:lock",
	"with space", " ", "%7B", "%", "%%7D", "\xff\xfe\x00", "ünïcødé", strings.Repeat("long", 100),
}

func testNoCrossSlot(t *testing.T, client func() redis.UniversalClient) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ls := newLockers(t, 2, client)
	a, b := ls[0], ls[1]
	// Hold every name at once: different names never share keys.
	held := map[string]*fairlock.Lease{}
	for _, name := range awkwardNames {
		lease, err := a.Acquire(ctx, name)
		if err != nil {
			t.Fatalf("Acquire(%q): %v", name, err)
		}
		held[name] = lease
	}
	for _, name := range awkwardNames {
		if _, err := b.TryAcquire(ctx, name); !errors.Is(err, fairlock.ErrNotAcquired) {
			t.Fatalf("TryAcquire(%q) while held: %v, want ErrNotAcquired", name, err)
		}
		// A waiter on another Locker exercises queue, order, session and notify.
		got := make(chan error, 1)
		go func() {
			l, err := b.Acquire(ctx, name)
			if err == nil {
				if err = l.Extend(ctx, 2*time.Second); err == nil {
					err = l.Release(ctx)
				}
			}
			got <- err
		}()
		waitWaiters(t, a, name, 1)
		st, err := a.Inspect(ctx, fairlock.LockMutex, name)
		if err != nil || !st.Held() || st.Holders[0].Token != held[name].Token() {
			t.Fatalf("Inspect(%q) = %+v, %v", name, st, err)
		}
		if err := held[name].Release(ctx); err != nil {
			t.Fatalf("Release(%q): %v", name, err)
		}
		if err := <-got; err != nil {
			t.Fatalf("waiter on %q: %v", name, err)
		}
	}
	t.Logf("%d awkward names: acquire, queue, hand-off, extend, release, inspect: no CROSSSLOT", len(awkwardNames))
}

// waitWaiters polls Inspect until the mutex name has n live waiters.
func waitWaiters(t *testing.T, l *fairlock.Locker, name string, n int) {
	t.Helper()
	waitKindWaiters(t, l, mutexKind, name, n)
}

// waitKindWaiters polls Inspect until name, of kind k, has n live waiters.
func waitKindWaiters(t *testing.T, l *fairlock.Locker, k kind, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := lockCensus(context.Background(), l, k, name)
		if err == nil && st.Waiters == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q: waiting for %d waiters, have %+v (err %v)", name, n, st, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func testClusterFIFO(t *testing.T, client func() redis.UniversalClient) {
	const n = 20
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ls := newLockers(t, n+1, client) // each waiter on its own Locker and ClusterClient
	name := "fifo:{cluster}"
	holder, err := ls[n].Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan int, n)
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			lease, err := ls[i].Acquire(ctx, name)
			if err != nil {
				errs <- err
				return
			}
			order <- i
			errs <- lease.Release(ctx)
		}()
		waitWaiters(t, ls[n], name, i+1) // arrival order made certain
	}
	start := time.Now()
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	close(order)
	var got []int
	for i := range order {
		got = append(got, i)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("grant order %v, want 0..%d", got, n-1)
		}
	}
	t.Logf("FIFO: %d waiters on %d Lockers (own ClusterClient each) granted in arrival order; drain %v, %v per hand-off",
		n, n, elapsed.Round(time.Microsecond), (elapsed / n).Round(time.Microsecond))
}

// tracker checks mutual exclusion and fences from the holders' side.
type tracker struct {
	mu        sync.Mutex
	holder    map[string]*fairlock.Lease
	lastFence map[string]int64
	overlaps  int // granted while another lease on the name was held and not known lost
	regress   int // fence not above the previous grant's
	grants    int
	lastGrant map[string]time.Time
	maxGap    map[string]time.Duration // longest time without a grant, per name
}

func newTracker() *tracker {
	return &tracker{
		holder: map[string]*fairlock.Lease{}, lastFence: map[string]int64{},
		lastGrant: map[string]time.Time{}, maxGap: map[string]time.Duration{},
	}
}

func (tr *tracker) granted(l *fairlock.Lease) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	name := l.Name()
	if h := tr.holder[name]; h != nil {
		select {
		case <-h.Done(): // its holder knows it lost the lease
		default:
			tr.overlaps++
		}
	}
	tr.holder[name] = l
	if l.Fence() <= tr.lastFence[name] {
		tr.regress++
	}
	tr.lastFence[name] = max(tr.lastFence[name], l.Fence())
	now := time.Now()
	if last, ok := tr.lastGrant[name]; ok && now.Sub(last) > tr.maxGap[name] {
		tr.maxGap[name] = now.Sub(last)
	}
	tr.lastGrant[name] = now
	tr.grants++
}

// leaving is called before Release: the holder stops acting first.
func (tr *tracker) leaving(l *fairlock.Lease) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.holder[l.Name()] == l {
		delete(tr.holder, l.Name())
	}
}

func testClusterExclusion(t *testing.T, client func() redis.UniversalClient) {
	const lockers, perLocker, iters = 4, 3, 15
	names := []string{"mx-a", "mx-b", "mx-c"}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ls := newLockers(t, lockers, client)
	rc := client()
	tr := newTracker()
	var wg sync.WaitGroup
	var failed atomic.Value
	start := time.Now()
	for _, name := range names {
		counter := "mx-counter:" + name
		rc.Del(ctx, counter)
		for li := 0; li < lockers; li++ {
			for g := 0; g < perLocker; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < iters; i++ {
						lease, err := ls[li].Acquire(ctx, name)
						if err != nil {
							failed.Store(err)
							return
						}
						tr.granted(lease)
						// Non-atomic read-modify-write, correct only under the lock.
						v, err := rc.Get(ctx, counter).Int()
						if err != nil && !errors.Is(err, redis.Nil) {
							failed.Store(err)
						}
						rc.Set(ctx, counter, v+1, time.Minute)
						tr.leaving(lease)
						if err := lease.Release(ctx); err != nil {
							failed.Store(err)
						}
					}
				}()
			}
		}
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	for _, name := range names {
		if v, _ := rc.Get(ctx, "mx-counter:"+name).Int(); v != lockers*perLocker*iters {
			t.Errorf("%s: counter %d, want %d: two holders overlapped", name, v, lockers*perLocker*iters)
		}
	}
	if tr.overlaps != 0 || tr.regress != 0 {
		t.Errorf("overlaps %d, fence regressions %d, want 0", tr.overlaps, tr.regress)
	}
	t.Logf("mutual exclusion: %d names × %d goroutines on %d Lockers, %d grants in %v (%.0f grants/s): counters exact, 0 overlaps, fences strictly increasing",
		len(names), lockers*perLocker, lockers, tr.grants, elapsed.Round(time.Millisecond), float64(tr.grants)/elapsed.Seconds())
}

// pubsubClients counts pub/sub connections over every live node.
func pubsubClients(t *testing.T, c *redistest.Cluster) map[string]int {
	out := map[string]int{}
	for _, s := range c.Nodes {
		if !s.Alive() {
			continue
		}
		cl := redis.NewClient(&redis.Options{Addr: s.Addr})
		list, err := cl.ClientList(context.Background()).Result()
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
			// flags=P marks a pub/sub client; sub, psub and ssub count its channels.
			if strings.Contains(line, " flags=P") || strings.Contains(line, " flags=P ") {
				out[s.Addr]++
			}
		}
	}
	return out
}

// testPubSubConnections: one Locker waiting on locks spread over every shard
// keeps at most one pub/sub connection per shard.
func testPubSubConnections(t *testing.T, c *redistest.Cluster, client func() redis.UniversalClient) {
	const nNames = 30
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := pubsubClients(t, c)
	ls := newLockers(t, 2, client)
	holder, waiter := ls[0], ls[1]
	var leases []*fairlock.Lease
	shards := map[string]bool{}
	for i := 0; i < nNames; i++ {
		name := fmt.Sprintf("ps-%d", i)
		shards[c.PrimaryFor(t, "{"+name+"}").Addr] = true
		l, err := holder.TryAcquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	var wg sync.WaitGroup
	errs := make(chan error, nNames)
	for i := 0; i < nNames; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := waiter.Acquire(ctx, fmt.Sprintf("ps-%d", i))
			if err == nil {
				err = l.Release(ctx)
			}
			errs <- err
		}()
	}
	for i := 0; i < nNames; i++ {
		waitWaiters(t, holder, fmt.Sprintf("ps-%d", i), 1)
	}
	during := pubsubClients(t, c)
	total := 0
	for addr, n := range during {
		total += n - before[addr]
	}
	for _, l := range leases {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("pub/sub: one Locker waiting on %d locks over %d shards holds %d pub/sub connection(s) (bound: one per shard = %d); per node %v",
		nNames, len(shards), total, len(c.Primaries(t)), during)
	if total > len(c.Primaries(t)) {
		t.Errorf("%d pub/sub connections for one Locker, want at most one per shard (%d)", total, len(c.Primaries(t)))
	}
}

// testPubSubKill kills every pub/sub connection (CLIENT KILL TYPE pubsub on
// every primary) while one Locker waits on locks in many slots, then
// releases them one by one: a grant that comes within a few ms came by
// message; one that took about a heartbeat was found by the heartbeat, its
// message lost because the channel was not subscribed again. go-redis
// resubscribes every shard channel of a PubSub in one SSUBSCRIBE, which
// fails with CROSSSLOT when they span several slots.
func testPubSubKill(t *testing.T, c *redistest.Cluster, client func() redis.UniversalClient) {
	const nNames = 8
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Heartbeat 200 ms: a grant found by the heartbeat is easy to tell
	// from one that came by message, and the round stays short.
	ls := newLockers(t, 2, client, fairlock.WithWaiterTTL(600*time.Millisecond))
	holder, waiter := ls[0], ls[1]
	names := make([]string, nNames)
	for i := range names {
		names[i] = fmt.Sprintf("pk-%d", i)
	}
	round := func(kill bool) (byMsg int, slowest time.Duration, all []string) {
		leases := make([]*fairlock.Lease, nNames)
		for i, name := range names {
			l, err := holder.TryAcquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			leases[i] = l
		}
		got := make([]chan time.Time, nNames)
		for i, name := range names {
			got[i] = make(chan time.Time, 1)
			go func() {
				l, err := waiter.Acquire(ctx, name)
				if err != nil {
					t.Error(err)
					got[i] <- time.Time{}
					return
				}
				got[i] <- time.Now()
				l.Release(ctx) //nolint:errcheck // checked elsewhere
			}()
			waitWaiters(t, holder, name, 1)
		}
		if kill {
			for _, p := range c.Primaries(t) {
				cl := redis.NewClient(&redis.Options{Addr: p.Addr})
				cl.ClientKillByFilter(ctx, "TYPE", "pubsub") //nolint:errcheck // counted by the figures below
				cl.Close()
			}
			time.Sleep(300 * time.Millisecond) // let go-redis reconnect and resubscribe
		}
		for i := range names {
			t0 := time.Now()
			if err := leases[i].Release(ctx); err != nil {
				t.Fatal(err)
			}
			at := <-got[i]
			d := at.Sub(t0)
			if d < 50*time.Millisecond {
				byMsg++
			}
			slowest = max(slowest, d)
			all = append(all, d.Round(time.Millisecond).String())
		}
		return byMsg, slowest, all
	}
	m0, s0, _ := round(false)
	m1, s1, all := round(true)
	m2, s2, _ := round(false)
	t.Logf("pub/sub kill: hand-offs under 50 ms (by message) out of %d: %d before the kill (slowest %v), %d right after CLIENT KILL TYPE pubsub (slowest %v; all %v), %d in the next round (slowest %v); heartbeat %v",
		nNames, m0, s0.Round(time.Millisecond), m1, s1.Round(time.Millisecond), all, m2, s2.Round(time.Millisecond), waiter.Heartbeat())
	if bound := waiter.Heartbeat() + 500*time.Millisecond; s1 > bound || s2 > bound {
		t.Errorf("a grant took longer than a heartbeat (+500 ms) after the pub/sub connections were killed")
	}
}

// testNotifyFanOut measures how many cluster-bus messages one grant's
// notification costs. PUBLISH is broadcast to every node (5 bus messages per
// grant with 6 nodes); SPUBLISH stays in the shard (1 per grant: its replica).
func testNotifyFanOut(t *testing.T, c *redistest.Cluster, client func() redis.UniversalClient) {
	const handoffs = 200
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ls := newLockers(t, 2, client)
	name := "fanout"
	pub0 := c.ClusterInfoSum(t, "cluster_stats_messages_publish_received")
	spub0 := c.ClusterInfoSum(t, "cluster_stats_messages_publishshard_received")
	// Two Lockers hand the lock back and forth: every grant after the
	// first is a hand-off to a waiter, notified by the release script.
	var wg sync.WaitGroup
	var granted atomic.Int64
	var failed atomic.Value
	for _, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for granted.Load() < handoffs {
				lease, err := l.Acquire(ctx, name)
				if err != nil {
					failed.Store(err)
					return
				}
				granted.Add(1)
				time.Sleep(200 * time.Microsecond) // let the other Locker queue
				if err := lease.Release(ctx); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // bus messages are asynchronous
	pub := c.ClusterInfoSum(t, "cluster_stats_messages_publish_received") - pub0
	spub := c.ClusterInfoSum(t, "cluster_stats_messages_publishshard_received") - spub0
	n := float64(granted.Load())
	t.Logf("notify fan-out over %d grants: %d broadcast PUBLISH bus messages (%.2f/grant), %d sharded SPUBLISH bus messages (%.2f/grant); 6 nodes, so a broadcast costs 5 per message",
		granted.Load(), pub, float64(pub)/n, spub, float64(spub)/n)
	if float64(pub)/n >= 1 {
		t.Errorf("notifications are broadcast to every node (%.2f bus messages per grant): want SPUBLISH in the lock's slot", float64(pub)/n)
	}
}

// testSpread holds 10,000 locks at once (2,000 without
// redistest.LongRuns) and shows their keys spread over the three primaries.
func testSpread(t *testing.T, c *redistest.Cluster, client func() redis.UniversalClient) {
	const workers = 16
	nNames := redistest.Long(2000, 10000)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// Leases longer than the test's ctx: without renewal they must outlive
	// the acquire phase, which took 60 s under -race with a core busy.
	ls := newLockers(t, 2, client, fairlock.WithAutoRenew(false), fairlock.WithLeaseTTL(5*time.Minute), fairlock.WithKeyPrefix("spread"))
	before := c.KeysPerPrimary(t)
	leases := make([]*fairlock.Lease, nNames)
	var next atomic.Int64
	var failed atomic.Value
	run := func(f func(i int) error) time.Duration {
		next.Store(0)
		start := time.Now()
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1) - 1)
					if i >= nNames {
						return
					}
					if err := f(i); err != nil {
						failed.Store(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	acq := run(func(i int) (err error) {
		leases[i], err = ls[i%2].TryAcquire(ctx, fmt.Sprintf("name-%d", i))
		return err
	})
	during := c.KeysPerPrimary(t)
	var parts []string
	total := int64(0)
	for _, n := range during {
		total += n
	}
	for _, addr := range sortedKeys(during) {
		d := during[addr] - before[addr]
		parts = append(parts, fmt.Sprintf("%s: %d keys (%.1f%%)", addr, d, 100*float64(d)/float64(total)))
		if float64(d) < 0.25*float64(total) {
			t.Errorf("shard %s holds %d of %d keys: not spread", addr, d, total)
		}
	}
	noTTL := keysWithoutTTL(t, c, "spread:*")
	rel := run(func(i int) error { return leases[i].Release(ctx) })
	after := c.KeysPerPrimary(t)
	t.Logf("spread: %d names held at once on %d primaries: %s", nNames, len(during), strings.Join(parts, ", "))
	t.Logf("spread: %d TryAcquire in %v (%.0f/s), %d Release in %v (%.0f/s), %d workers; keys without TTL: %d; keys per primary after release %v",
		nNames, acq.Round(time.Millisecond), float64(nNames)/acq.Seconds(), nNames, rel.Round(time.Millisecond), float64(nNames)/rel.Seconds(), workers, noTTL, after)
	if noTTL != 0 {
		t.Errorf("%d keys without a TTL", noTTL)
	}
	if len(during) != 3 {
		t.Errorf("%d primaries, want 3", len(during))
	}
}

func sortedKeys(m map[string]int64) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// keysWithoutTTL scans every primary for keys matching pattern with no TTL.
func keysWithoutTTL(t *testing.T, c *redistest.Cluster, pattern string) int {
	ctx := context.Background()
	n := 0
	for _, s := range c.Primaries(t) {
		cl := redis.NewClient(&redis.Options{Addr: s.Addr})
		var cursor uint64
		for {
			keys, cur, err := cl.Scan(ctx, cursor, pattern, 2000).Result()
			if err != nil {
				t.Fatal(err)
			}
			cmds, _ := cl.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, k := range keys {
					p.PTTL(ctx, k)
				}
				return nil
			})
			for _, cmd := range cmds {
				if d, err := cmd.(*redis.DurationCmd).Result(); err == nil && d == -1*time.Millisecond {
					n++
				}
			}
			if cursor = cur; cursor == 0 {
				break
			}
		}
		cl.Close()
	}
	return n
}

// testResharding moves the slot of a busy mutex and a busy semaphore (one
// name, so one slot) to another primary and back, 2 keys at a time with a
// pause between the MIGRATEs, as redis-cli --cluster reshard does it: for
// most of a move the locks' keys are split between the two nodes. MOVED and
// ASK must be followed and TRYAGAIN (a command over split keys, which
// Redis refused without running) retried, within the caller's context and
// bounds: no caller sees them. It reports what the moves cost: the longest
// time each lock went without a grant.
func testResharding(t *testing.T, c *redistest.Cluster, client func() redis.UniversalClient) {
	const name, batch, pause = "resharded", 2, 25 * time.Millisecond
	// Short TTLs: a Release that fails mid-migration costs at most a lease.
	ls := newLockers(t, 3, client, failoverLockerOpts...)
	slot := redistest.KeySlot("{" + name + "}")
	src := c.PrimaryFor(t, "{"+name+"}")
	var dst *redistest.Server
	for _, p := range c.Primaries(t) {
		if p != src {
			dst = p
			break
		}
	}
	tr := newTracker()
	stop := make(chan struct{})
	st := drain(ls, []string{name}, 2, tr, stop)
	sem := drainSemaphore(t, ls, name, 2, 3, stop)
	time.Sleep(300 * time.Millisecond)
	g0 := st.grants.Load()
	var moves []string
	var semGap, mutexGap time.Duration
	for i, from := range []*redistest.Server{src, dst} {
		to := []*redistest.Server{dst, src}[i]
		st.watch.from(time.Now())
		sem.watch.from(time.Now())
		t0 := time.Now()
		n := c.MigrateSlot(t, slot, from, to, batch, pause) // returns once every node agrees
		moves = append(moves, fmt.Sprintf("%s→%s, %d keys in %v", from.Addr, to.Addr, n, time.Since(t0).Round(time.Millisecond)))
		time.Sleep(500 * time.Millisecond)
		mutexGap, semGap = max(mutexGap, st.watch.close(time.Now())), max(semGap, sem.watch.close(time.Now()))
	}
	g1 := st.grants.Load()
	close(stop)
	st.wg.Wait()
	sem.wg.Wait()
	t.Logf("resharding: slot %d moved %v, %d keys a MIGRATE, %v apart, during a drain (lease/waiter TTL 1s): %d grants during/after, %d overlaps, %d fence regressions, max Acquire %v (bound %v)",
		slot, moves, batch, pause, g1-g0, tr.overlaps, tr.regress, time.Duration(st.maxWait.Load()).Round(time.Millisecond), attemptBound)
	t.Logf("resharding: longest time without a grant, from each move's start to 500 ms after it: mutex %v, semaphore %v (%d grants)",
		mutexGap.Round(time.Millisecond), semGap.Round(time.Millisecond), sem.grants.Load())
	t.Logf("resharding: errors returned to callers: %d Acquire, %d Release on the mutex, %d on the semaphore: %s %s",
		st.acquireErrs.Load(), st.releaseErrs.Load(), sem.acquireErrs.Load()+sem.releaseErrs.Load(), st.firstErr(), sem.firstErr())
	// After the slot moved, the server ended every shard subscription of it
	// (an unsolicited SUNSUBSCRIBE). Do hand-offs still come by message?
	var lat []string
	byMsg := 0
	for k := 0; k < 5; k++ {
		ctx, cancel := context.WithTimeout(context.Background(), attemptBound)
		h, err := ls[0].Acquire(ctx, name)
		if err != nil {
			cancel()
			t.Fatalf("after resharding: %v", err)
		}
		got := make(chan time.Time, 1)
		go func() {
			l, err := ls[1].Acquire(ctx, name)
			if err == nil {
				l.Release(ctx) //nolint:errcheck // measured elsewhere
			}
			got <- time.Now()
		}()
		waitWaiters(t, ls[0], name, 1)
		t0 := time.Now()
		h.Release(ctx) //nolint:errcheck // a failure shows as a slow hand-off
		d := (<-got).Sub(t0)
		cancel()
		if d < 50*time.Millisecond {
			byMsg++
		}
		lat = append(lat, d.Round(time.Millisecond).String())
	}
	t.Logf("resharding: hand-offs after the slot moved: %d/5 under 50 ms (by message), latencies %v, heartbeat %v", byMsg, lat, ls[0].Heartbeat())
	if g1 == g0 || sem.grants.Load() == 0 {
		t.Errorf("no grant during or after resharding")
	}
	if tr.overlaps != 0 || tr.regress != 0 {
		t.Errorf("overlaps %d, fence regressions %d, want 0 (no data is lost in a migration)", tr.overlaps, tr.regress)
	}
	if st.hangs.Load() != 0 {
		t.Errorf("%d Acquire calls hit the %v bound", st.hangs.Load(), attemptBound)
	}
	if n := st.acquireErrs.Load() + st.releaseErrs.Load() + sem.acquireErrs.Load() + sem.releaseErrs.Load(); n != 0 {
		t.Errorf("%d calls returned an error during the migrations: %s %s", n, st.firstErr(), sem.firstErr())
	}
}

// A grantGaps keeps the longest time between grants in a window.
type grantGaps struct {
	mu          sync.Mutex
	start, last time.Time
	longest     time.Duration
	watching    bool
}

func (g *grantGaps) from(at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.start, g.last, g.longest, g.watching = at, at, 0, true
}

func (g *grantGaps) granted(at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.watching {
		g.longest, g.last = max(g.longest, at.Sub(g.last)), at
	}
}

// close ends the window at at, and returns its longest gap.
func (g *grantGaps) close(at time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.longest, g.watching = max(g.longest, at.Sub(g.last)), false
	return g.longest
}

// drainSemaphore runs workers on the semaphore called name of capacity
// permits, spread over ls, each taking 1 permit, holding it 1 ms, until
// stop.
func drainSemaphore(t *testing.T, ls []*fairlock.Locker, name string, capacity, workers int, stop <-chan struct{}) *drainStats {
	st := &drainStats{}
	for w := range workers {
		sem, err := ls[w%len(ls)].Semaphore(name, capacity)
		if err != nil {
			t.Fatal(err)
		}
		st.wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), attemptBound)
				lease, err := sem.Acquire(ctx, 1)
				cancel()
				if err != nil {
					st.acquireErrs.Add(1)
					st.noteErr(err)
					time.Sleep(20 * time.Millisecond)
					continue
				}
				st.grants.Add(1)
				st.watch.granted(time.Now())
				time.Sleep(time.Millisecond)
				rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
				if err := lease.Release(rctx); err != nil {
					st.releaseErrs.Add(1)
					st.noteErr(fmt.Errorf("release: %w", err))
				}
				rcancel()
			}
		})
	}
	return st
}

var (
	quoted = regexp.MustCompile(`"[^"]*"`)
	addrRE = regexp.MustCompile(`127\.0\.0\.1:\d+`)
)

// drainStats is what a drain saw.
type drainStats struct {
	wg          sync.WaitGroup
	grants      atomic.Int64
	acquireErrs atomic.Int64
	releaseErrs atomic.Int64 // ErrNotHeld: the lease was lost before Release
	lost        atomic.Int64 // leases that ended with ErrLost while held
	hangs       atomic.Int64 // Acquire calls that hit attemptBound
	placeLost   atomic.Int64 // Acquire calls that returned ErrPlaceLost, which it never should
	maxWait     atomic.Int64 // longest Acquire, ns
	watch       grantGaps    // the longest time between grants
	errMu       sync.Mutex
	errs        map[string]int
}

func (s *drainStats) noteErr(err error) {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if s.errs == nil {
		s.errs = map[string]int{}
	}
	// Group by kind: drop lock names and addresses.
	msg := quoted.ReplaceAllString(err.Error(), "NAME")
	msg = addrRE.ReplaceAllString(msg, "ADDR")
	if len(msg) > 120 {
		msg = msg[:120]
	}
	s.errs[msg]++
}

func (s *drainStats) firstErr() string {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	var parts []string
	for k, v := range s.errs {
		parts = append(parts, fmt.Sprintf("%dx %q", v, k))
	}
	sort.Strings(parts)
	if len(parts) > 6 {
		parts = parts[:6]
	}
	return strings.Join(parts, "; ")
}

// drain runs perName workers per name, spread over the Lockers, each
// looping Acquire → hold 1 ms → Release until stop is closed. Errors are
// counted and the worker retries after 20 ms.
func drain(ls []*fairlock.Locker, names []string, perName int, tr *tracker, stop <-chan struct{}) *drainStats {
	st := &drainStats{}
	k := 0
	for _, name := range names {
		for w := 0; w < perName; w++ {
			l := ls[k%len(ls)]
			k++
			st.wg.Add(1)
			go func() {
				defer st.wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					ctx, cancel := context.WithTimeout(context.Background(), attemptBound)
					t0 := time.Now()
					lease, err := l.Acquire(ctx, name)
					waited := time.Since(t0)
					cancel()
					for {
						old := st.maxWait.Load()
						if int64(waited) <= old || st.maxWait.CompareAndSwap(old, int64(waited)) {
							break
						}
					}
					if err != nil {
						st.acquireErrs.Add(1)
						st.noteErr(err)
						if errors.Is(err, context.DeadlineExceeded) {
							st.hangs.Add(1)
						}
						if errors.Is(err, fairlock.ErrPlaceLost) {
							st.placeLost.Add(1)
						}
						time.Sleep(20 * time.Millisecond)
						continue
					}
					st.grants.Add(1)
					st.watch.granted(time.Now())
					tr.granted(lease)
					time.Sleep(time.Millisecond)
					tr.leaving(lease)
					if errors.Is(lease.Err(), fairlock.ErrLost) {
						st.lost.Add(1)
					}
					rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
					if err := lease.Release(rctx); err != nil {
						st.releaseErrs.Add(1)
						st.noteErr(fmt.Errorf("release: %w", err))
					}
					rcancel()
				}
			}()
		}
	}
	return st
}

// testThroughput compares grants/s on the cluster with one redis-server, same
// workload, same run: 32 names, 2 contending workers each on 4 Lockers,
// for 2 s each (half a second without redistest.LongRuns).
func testThroughput(t *testing.T, clusterClient func() redis.UniversalClient) {
	window := redistest.Long(500*time.Millisecond, 2*time.Second)
	names := make([]string, 32)
	for i := range names {
		names[i] = fmt.Sprintf("tp-%d", i)
	}
	measure := func(client func() redis.UniversalClient) (float64, *tracker, *drainStats) {
		ls := newLockers(t, 4, client)
		tr := newTracker()
		stop := make(chan struct{})
		st := drain(ls, names, 2, tr, stop)
		time.Sleep(300 * time.Millisecond) // warm up: subscriptions, script cache
		g0 := st.grants.Load()
		time.Sleep(window)
		g1 := st.grants.Load()
		close(stop)
		st.wg.Wait()
		for _, l := range ls {
			l.Close()
		}
		return float64(g1-g0) / window.Seconds(), tr, st
	}
	single := redistest.Start(t)
	singleClient := func() redis.UniversalClient { return single.Client(t) }
	cl, trc, stc := measure(clusterClient)
	sg, trs, sts := measure(singleClient)
	t.Logf("throughput: cluster %.0f grants/s, single Redis %.0f grants/s, ratio cluster/single = %.2f (32 names × 2 workers on 4 Lockers, %v window; 6 cluster nodes and the test share this machine's cores)",
		cl, sg, cl/sg, window)
	for _, x := range []struct {
		what string
		tr   *tracker
		st   *drainStats
	}{{"cluster", trc, stc}, {"single", trs, sts}} {
		if x.tr.overlaps != 0 || x.tr.regress != 0 || x.st.acquireErrs.Load() != 0 || x.st.releaseErrs.Load() != 0 {
			t.Errorf("%s: overlaps %d, fence regressions %d, acquire errors %d, release errors %d (%s)",
				x.what, x.tr.overlaps, x.tr.regress, x.st.acquireErrs.Load(), x.st.releaseErrs.Load(), x.st.firstErr())
		}
	}
}

// failoverReport runs a drain, kills a primary (kill), waits for promotion
// (promoted) and keeps draining, then prints and checks what happened.
func failoverReport(t *testing.T, what string, ls []*fairlock.Locker, names []string, perName int,
	kill func() time.Time, promoted func(killed time.Time) time.Duration) {
	t.Helper()
	tr := newTracker()
	stop := make(chan struct{})
	st := drain(ls, names, perName, tr, stop)
	time.Sleep(time.Second)
	before := st.grants.Load()
	tr.mu.Lock()
	ov0, rg0 := tr.overlaps, tr.regress
	tr.mu.Unlock()
	killed := kill()
	promo := promoted(killed)
	// Measure how long until every name is granted again after the kill.
	recovered := map[string]time.Duration{}
	deadline := time.Now().Add(attemptBound)
	for len(recovered) < len(names) && time.Now().Before(deadline) {
		tr.mu.Lock()
		for _, n := range names {
			if g, ok := tr.lastGrant[n]; ok && g.After(killed) {
				if _, done := recovered[n]; !done {
					recovered[n] = g.Sub(killed)
				}
			}
		}
		tr.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	var worst time.Duration
	for _, d := range recovered {
		worst = max(worst, d)
	}
	after0 := st.grants.Load()
	time.Sleep(time.Second)
	after1 := st.grants.Load()
	close(stop)
	st.wg.Wait()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	t.Logf("%s failover: promotion seen %v after the kill; every one of %d names granted again within %v (worst); %d grants before, %d after (%d in the last second)",
		what, promo.Round(time.Millisecond), len(names), worst.Round(time.Millisecond), before, st.grants.Load()-before, after1-after0)
	t.Logf("%s failover: overlapping grants (two holders at once) %d [%d before the kill], fence regressions %d, leases lost while held %d, Release ErrNotHeld/errors %d, Acquire errors %d (%s), longest Acquire %v (bound %v), Acquire calls at the bound %d",
		what, tr.overlaps, ov0, tr.regress-rg0, st.lost.Load(), st.releaseErrs.Load(), st.acquireErrs.Load(), st.firstErr(),
		time.Duration(st.maxWait.Load()).Round(time.Millisecond), attemptBound, st.hangs.Load())
	t.Logf("%s failover: overlap rate %.4f per grant (%d/%d), leases lost %.4f per grant (Lockers without WithReplicaAck)",
		what, float64(tr.overlaps)/float64(max(tr.grants, 1)), tr.overlaps, tr.grants, float64(st.lost.Load())/float64(max(tr.grants, 1)))
	if len(recovered) < len(names) {
		t.Errorf("%d of %d names never granted again within %v of the kill", len(names)-len(recovered), len(names), attemptBound)
	}
	if st.hangs.Load() != 0 {
		t.Errorf("%d Acquire calls hung until the %v bound", st.hangs.Load(), attemptBound)
	}
	if n := st.placeLost.Load(); n != 0 {
		t.Errorf("%d Acquire calls returned ErrPlaceLost, which only events carry", n)
	}
	if after1 == after0 {
		t.Errorf("no grant in the last second: the drain did not continue")
	}
	if ov0 != 0 {
		t.Errorf("%d overlaps before any failover", ov0)
	}
}

// countingLogger swallows go-redis's log lines (hundreds of "connection
// refused" during a failover) and counts them.
type countingLogger struct {
	mu    sync.Mutex
	n     int
	first string
}

func (l *countingLogger) Printf(_ context.Context, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		l.first = fmt.Sprintf(format, v...)
	}
	l.n++
}

// quietRedisLog silences go-redis's global logger for the test and reports
// how much it said.
func quietRedisLog(t *testing.T) {
	cl := &countingLogger{}
	redis.SetLogger(cl)
	t.Cleanup(func() {
		redis.SetLogger(stderrLogger{log.New(os.Stderr, "redis: ", log.LstdFlags|log.Lshortfile)})
		cl.mu.Lock()
		defer cl.mu.Unlock()
		t.Logf("go-redis logged %d lines (first: %q)", cl.n, cl.first)
	})
}

type stderrLogger struct{ l *log.Logger }

func (s stderrLogger) Printf(_ context.Context, format string, v ...any) {
	s.l.Output(2, fmt.Sprintf(format, v...)) //nolint:errcheck // logging
}

// killPrimary kills primary and returns when, with the replication lag in
// bytes just before the kill.
func killPrimary(t *testing.T, primary, replica *redistest.Server) (time.Time, int64) {
	lag, err := redistest.ReplicationLag(context.Background(), primary, replica)
	if err != nil {
		t.Logf("replication lag: %v", err)
	}
	primary.Kill()
	return time.Now(), lag
}

// lostGrantScenario is the worst case of asynchronous replication, made
// certain: replication is stalled, then each name is granted to a holder
// (default 10 s lease, auto-renewed, so it outlives the failover) and a
// waiter queues behind it on another Locker; then the primary dies. The
// promoted replica has never seen those grants. It reports how many holders
// lose their lease and how many waiters are granted while the old holder
// still believes it holds (overlaps), and how long each takes.
//
// In the same failover, the names in ackNames are acquired during the stall
// by a Locker with WithReplicaAck(1, ackTimeout): it should report no grant
// at all (ErrNotReplicated), so none can be lost.
func lostGrantScenario(t *testing.T, what string, client func() redis.UniversalClient, names, ackNames []string,
	primary, replica *redistest.Server, promoted func() time.Duration) {
	t.Helper()
	const ackTimeout = 200 * time.Millisecond
	opts := []fairlock.Option{fairlock.WithLeaseTTL(10 * time.Second), fairlock.WithWaiterTTL(time.Second)}
	ls := newLockers(t, 2, client, opts...)
	lh, lw := ls[0], ls[1]
	lack := newLockers(t, 1, client, append(opts, fairlock.WithReplicaAck(1, ackTimeout))...)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// WAIT works before the stall.
	for _, name := range ackNames[:1] {
		l, err := lack.Acquire(ctx, name)
		if err != nil {
			t.Fatalf("%s: WithReplicaAck acquire with a healthy replica: %v", what, err)
		}
		l.Release(ctx) //nolint:errcheck // just a probe
	}
	if err := redistest.StallReplication(ctx, primary); err != nil {
		t.Fatalf("stall replication: %v", err)
	}
	tr := newTracker()
	var ackHolders []*fairlock.Lease
	ackRefused, ackOther := 0, 0
	ackStart := time.Now()
	for _, name := range ackNames {
		l, err := lack.Acquire(ctx, name)
		switch {
		case err == nil:
			tr.granted(l)
			ackHolders = append(ackHolders, l) // reported though unreplicated: would be a bug
		case errors.Is(err, fairlock.ErrNotReplicated):
			ackRefused++
		default:
			ackOther++
			t.Logf("%s: WithReplicaAck acquire %q: %v", what, name, err)
		}
	}
	ackTook := time.Since(ackStart)
	holders := make([]*fairlock.Lease, len(names))
	for i, name := range names {
		h, err := lh.Acquire(ctx, name)
		if err != nil {
			t.Fatalf("%s: acquire %q before the failover: %v", what, name, err)
		}
		tr.granted(h)
		holders[i] = h
	}
	lostAt := make([]time.Time, len(names)) // when each holder was told
	var lostWG sync.WaitGroup
	for i, h := range holders {
		lostWG.Add(1)
		go func() {
			defer lostWG.Done()
			select {
			case <-h.Done():
				lostAt[i] = time.Now()
			case <-ctx.Done():
			}
		}()
	}
	type result struct {
		i     int
		lease *fairlock.Lease
		at    time.Time
		err   error
	}
	results := make(chan result, len(names))
	for i, name := range names {
		go func() {
			actx, acancel := context.WithTimeout(ctx, attemptBound)
			defer acancel()
			var l *fairlock.Lease
			var err error
			for {
				// Retry errors from the failover itself; a hang ends at the bound.
				if l, err = lw.Acquire(actx, name); err == nil || actx.Err() != nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err == nil {
				tr.granted(l)
			}
			results <- result{i, l, time.Now(), err}
		}()
	}
	for _, name := range names {
		waitWaiters(t, lh, name, 1)
	}
	killed, lag := killPrimary(t, primary, replica)
	promo := promoted()
	var granted, errs int
	grantAt := make([]time.Time, len(names))
	var leases []*fairlock.Lease
	for range names {
		r := <-results
		if r.err != nil {
			errs++
			t.Logf("%s: waiter: %v", what, r.err)
			continue
		}
		granted++
		grantAt[r.i] = r.at
		leases = append(leases, r.lease)
	}
	// Give holders not yet told a moment, then end everything.
	wait := time.NewTimer(2 * time.Second)
	done := make(chan struct{})
	go func() { lostWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-wait.C:
	}
	ackLost := 0
	for _, h := range ackHolders {
		if errors.Is(h.Err(), fairlock.ErrLost) {
			ackLost++
		}
		tr.leaving(h)
		h.Release(ctx) //nolint:errcheck // may be lost
	}
	// Availability: the promoted primary has no replica left.
	actx, acancel := context.WithTimeout(ctx, 2*time.Second)
	_, afterErr := lack.Acquire(actx, ackNames[0])
	acancel()
	tr.mu.Lock()
	overlaps := tr.overlaps
	tr.mu.Unlock()
	for _, l := range leases {
		tr.leaving(l)
		l.Release(ctx) //nolint:errcheck // the test is over for this lease
	}
	for _, h := range holders {
		tr.leaving(h)
		h.Release(ctx) //nolint:errcheck // may be lost
	}
	cancel()
	lostWG.Wait()
	lost := 0
	var margins []string
	var lastLost, lastGrant time.Duration
	minMargin := time.Duration(1 << 62)
	for i, h := range holders {
		if errors.Is(h.Err(), fairlock.ErrLost) && !lostAt[i].IsZero() {
			lost++
			lastLost = max(lastLost, lostAt[i].Sub(killed))
		}
		if !grantAt[i].IsZero() {
			lastGrant = max(lastGrant, grantAt[i].Sub(killed))
		}
		if !grantAt[i].IsZero() && !lostAt[i].IsZero() {
			m := grantAt[i].Sub(lostAt[i])
			minMargin = min(minMargin, m)
			margins = append(margins, m.Round(time.Millisecond).String())
		}
	}
	t.Logf("%s: %d grants made while replication was stalled (replica %d bytes behind at the kill), promotion %v after the kill",
		what, len(names), lag, promo.Round(time.Millisecond))
	t.Logf("%s: after the failover: %d/%d holders told ErrLost (last %v after the kill), %d/%d waiters granted (last %v after the kill), %d waiter errors",
		what, lost, len(names), lastLost.Round(time.Millisecond), granted, len(names), lastGrant.Round(time.Millisecond), errs)
	t.Logf("%s: without WAIT: lost-grant rate %d/%d; overlapping grants (waiter granted while the old holder still believed it held) %d/%d; new grant minus old holder's ErrLost per name: %v (negative = overlap)",
		what, lost, len(names), overlaps, len(names), margins)
	t.Logf("%s: with WithReplicaAck(1, %v), same stall and failover: %d/%d grants reported, %d refused with ErrNotReplicated, %d other errors (%v for all); reported grants lost: %d",
		what, ackTimeout, len(ackHolders), len(ackNames), ackRefused, ackOther, ackTook.Round(time.Millisecond), ackLost)
	t.Logf("%s: with WithReplicaAck(1) after the failover, the promoted primary has no replica: Acquire -> %v", what, afterErr)
	if len(ackHolders) != 0 {
		t.Errorf("WithReplicaAck reported %d grants that no replica had acknowledged", len(ackHolders))
	}
	if errs != 0 {
		t.Errorf("%d waiters hung or failed past the %v bound", errs, attemptBound)
	}
	if lost+granted == 0 {
		t.Errorf("neither a lost lease nor a grant: nothing measured")
	}
}

// TestClusterFailover kills a primary that owns drained locks and checks
// that the waiters carry on after its replica is promoted; then, on another
// shard, it measures lost grants with replication stalled.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	quietRedisLog(t) // first, so that it is restored last
	c := redistest.StartCluster(t)
	prims := c.Primaries(t)
	// go-redis v9.23 does not reload its slot map when a primary stops
	// answering (only on MOVED/ASK/READONLY, or every
	// ClusterStateReloadInterval, default 60 s): without a short interval the
	// killed primary's slots keep failing with "connection refused" for up
	// to a minute after the replica's promotion.
	opt := clusterClientOptions()
	opt.ClusterStateReloadInterval = time.Second
	client := func() redis.UniversalClient { return c.Client(t, opt) }
	// namesOn returns n names on primary p and m on primary q.
	namesOn := func(prefix string, p *redistest.Server, n int, q *redistest.Server, m int) []string {
		var out []string
		for i, onP := 0, 0; len(out) < n+m; i++ {
			name := fmt.Sprintf("%s-%d", prefix, i)
			owner := c.PrimaryFor(t, "{"+name+"}")
			if owner == p && onP < n {
				out, onP = append(out, name), onP+1
			} else if owner == q && len(out)-onP < m {
				out = append(out, name)
			}
		}
		return out
	}

	victim, bystander := prims[0], prims[2]
	replica := c.ReplicaOf(t, victim)
	if replica == nil {
		top, _ := c.Topology(context.Background())
		t.Fatalf("no replica of %s: %+v", victim, top)
	}
	names := namesOn("fo", victim, 4, bystander, 2)
	ls := newLockers(t, 4, client, failoverLockerOpts...)
	failoverReport(t, "cluster", ls, names, 3,
		func() time.Time {
			killed, lag := killPrimary(t, victim, replica)
			t.Logf("cluster: killed primary %s (owns %v; replica %s was %d bytes behind), node timeout %v",
				victim, names[:4], replica.Addr, lag, redistest.ClusterNodeTimeout)
			return killed
		},
		func(killed time.Time) time.Duration {
			c.WaitHealthy(t, 20*time.Second)
			return time.Since(killed)
		})
	for _, l := range ls {
		l.Close()
	}

	victim = prims[1]
	if replica = c.ReplicaOf(t, victim); replica == nil {
		t.Fatalf("no replica of %s", victim)
	}
	lg := namesOn("lg", victim, 12, nil, 0)
	lostGrantScenario(t, "cluster lost-grant", client, lg[:8], lg[8:], victim, replica,
		func() time.Duration {
			t0 := time.Now()
			c.WaitHealthy(t, 20*time.Second)
			return time.Since(t0)
		})
}

// TestSentinelFailover does the same through redis.NewFailoverClient, on a
// primary, a replica and three sentinels (a fresh setup per scenario).
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts Redis Sentinel")
	}
	quietRedisLog(t)
	// Each scenario runs in a subtest, so that its servers and sentinels are
	// stopped before the next starts: sentinels left running would adopt a
	// new server that reuses a port of theirs.
	setup := func(t *testing.T, what string) (*redistest.Sentinels, func() redis.UniversalClient) {
		t0 := time.Now()
		s := redistest.StartSentinels(t)
		t.Logf("%s: primary %s, replica %s, sentinels %v ready in %v", what, s.Primary.Addr, s.Replica.Addr, s.Addrs, time.Since(t0).Round(time.Millisecond))
		return s, func() redis.UniversalClient {
			return s.Client(t, &redis.FailoverOptions{DialTimeout: 500 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second})
		}
	}
	promotedBy := func(t *testing.T, s *redistest.Sentinels) func() time.Duration {
		return func() time.Duration {
			t0 := time.Now()
			if addr := s.WaitPromoted(t, s.Primary.Addr, 30*time.Second); addr != s.Replica.Addr {
				t.Errorf("promoted %s, want the replica %s", addr, s.Replica.Addr)
			}
			return time.Since(t0)
		}
	}

	t.Run("drain", func(t *testing.T) {
		s, client := setup(t, "sentinel")
		ls := newLockers(t, 4, client, failoverLockerOpts...)
		names := []string{"sfo-a", "sfo-b", "sfo-c", "sfo-d"}
		failoverReport(t, "sentinel", ls, names, 3,
			func() time.Time {
				killed, lag := killPrimary(t, s.Primary, s.Replica)
				t.Logf("sentinel: killed primary %s (replica was %d bytes behind), down-after %v", s.Primary, lag, redistest.SentinelDownAfter)
				return killed
			},
			func(killed time.Time) time.Duration {
				promotedBy(t, s)()
				return time.Since(killed)
			})
	})
	t.Run("lost-grant", func(t *testing.T) {
		s, client := setup(t, "sentinel lost-grant")
		lostGrantScenario(t, "sentinel lost-grant", client, []string{"slg-a", "slg-b", "slg-c", "slg-d", "slg-e", "slg-f", "slg-g", "slg-h"},
			[]string{"sack-a", "sack-b", "sack-c", "sack-d"}, s.Primary, s.Replica, promotedBy(t, s))
	})
}

// ---------------------------------------------------------------------------
// The semaphore and the read-write lock on the cluster.

// recorded is Acquire-like calls of in-process Lockers, recorded in a
// History as the fault suite's agents record theirs, for the same checker.
type recorded struct{ h *History }

// acquire has l acquire r on name as waiter w of process proc.
func (rc recorded) acquire(ctx context.Context, l *fairlock.Locker, proc, w, name string, r Req) (*fairlock.Lease, error) {
	acquire, err := acquirer(l, r, name, false)
	if err != nil {
		return nil, err
	}
	call := callEv(w, name, r)
	call.Proc = proc
	rc.h.Add(call)
	lease, err := acquire(ctx, fairlock.OnQueued(func(pos int) { rc.h.Add(Ev{Proc: proc, W: w, Kind: "queued", Pos: pos}) }))
	t := monoNow()
	if err != nil {
		rc.h.Add(Ev{T: t, Proc: proc, W: w, Kind: "acqerr", Err: errClass(err)})
		return nil, err
	}
	rc.h.Add(Ev{T: t, Proc: proc, W: w, Kind: "granted", Fence: lease.Fence(), Tok: lease.Token()})
	return lease, nil
}

// release releases the lease of waiter w, stamped before the call.
func (rc recorded) release(ctx context.Context, proc, w string, lease *fairlock.Lease) error {
	t := monoNow()
	err := lease.Release(ctx)
	rc.h.Add(Ev{T: t, Proc: proc, W: w, Kind: "rel", Err: errClass(err), Fence: lease.Fence()})
	return err
}

// check runs the checker on what was recorded and fails t on a violation.
func (rc recorded) check(t *testing.T) *CheckResult {
	t.Helper()
	r := Check(rc.h.Events(), CheckOpts{})
	if err := r.Err(); err != nil {
		t.Errorf("history check failed: %v", err)
	}
	if r.Lost != 0 {
		t.Errorf("%d leases lost on a healthy cluster", r.Lost)
	}
	return r
}

// namePerShard returns one name of prefix on each primary.
func namePerShard(t *testing.T, c *redistest.Cluster, prefix string) []string {
	t.Helper()
	var names []string
	seen := map[*redistest.Server]bool{}
	for i := 0; len(names) < len(c.Primaries(t)); i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		if p := c.PrimaryFor(t, "{"+name+"}"); !seen[p] {
			seen[p] = true
			names = append(names, name)
		}
	}
	return names
}

// testKindsNoCrossSlot takes every awkward name as kind k's exclusive
// request, refuses a Try, queues a waiter on another Locker, hands it over,
// extends and releases it: every script of the kind touches one slot.
func testKindsNoCrossSlot(t *testing.T, k kind, client func() redis.UniversalClient) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ls := newLockers(t, 2, client)
	a, b := ls[0], ls[1]
	held := map[string]*fairlock.Lease{}
	for _, name := range awkwardNames {
		acquire, err := acquirer(a, k.all, name, false)
		if err != nil {
			t.Fatal(err)
		}
		if held[name], err = acquire(ctx); err != nil {
			t.Fatalf("%s %q: %v", k.all, name, err)
		}
	}
	waiterReq := k.pairs[0][1]
	for _, name := range awkwardNames {
		try, err := acquirer(b, waiterReq, name, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := try(ctx); !errors.Is(err, fairlock.ErrNotAcquired) {
			t.Fatalf("Try %s %q while held: %v, want ErrNotAcquired", waiterReq, name, err)
		}
		acquire, err := acquirer(b, waiterReq, name, false)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			l, err := acquire(ctx)
			if err == nil {
				if err = l.Extend(ctx, 2*time.Second); err == nil {
					err = l.Release(ctx)
				}
			}
			got <- err
		}()
		waitKindWaiters(t, a, k, name, 1)
		st, err := lockCensus(ctx, a, k, name)
		_, all := k.all.permits()
		if err != nil || st.Holders != 1 || int64(st.InUse) != all {
			t.Fatalf("Inspect %s %q = %+v, %v; want one holder of %d", k.name, name, st, err, all)
		}
		if err := held[name].Release(ctx); err != nil {
			t.Fatalf("Release %s %q: %v", k.name, name, err)
		}
		if err := <-got; err != nil {
			t.Fatalf("waiter %s on %q: %v", waiterReq, name, err)
		}
	}
	t.Logf("%s: %d awkward names: acquire, Try refused, queue, hand-off, extend, release, inspect: no CROSSSLOT", k.name, len(awkwardNames))
}

// testKindsFIFO queues 12 waiters, each on its own Locker and
// ClusterClient, with the kind's mixed requests, behind a hold of
// everything on one name per shard, so that every Locker waits on every
// shard at once; then it releases the three holds. Each name's grants must
// follow its arrival order (by fence: several are granted together), and
// the checker must find the capacity held.
func testKindsFIFO(t *testing.T, k kind, c *redistest.Cluster, client func() redis.UniversalClient) {
	const n = 12
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ls := newLockers(t, n+1, client)
	names := namePerShard(t, c, "kfifo-"+k.name)
	rc := recorded{newHistory()}
	var holds []*fairlock.Lease
	for _, name := range names {
		l, err := rc.acquire(ctx, ls[n], "holder", "holder."+name, name, k.all)
		if err != nil {
			t.Fatal(err)
		}
		holds = append(holds, l)
	}
	type grant struct {
		i     int
		fence int64
	}
	var mu sync.Mutex
	order := map[string][]grant{}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		for _, name := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				proc := fmt.Sprintf("l%d", i)
				w := fmt.Sprintf("%s.%s", proc, name)
				lease, err := rc.acquire(ctx, ls[i], proc, w, name, k.req(i))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order[name] = append(order[name], grant{i, lease.Fence()})
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
				if err := rc.release(ctx, proc, w, lease); err != nil {
					t.Error(err)
				}
			}()
			waitKindWaiters(t, ls[n], k, name, i+1) // arrival order made certain
		}
	}
	start := time.Now()
	for i, l := range holds {
		if err := rc.release(ctx, "holder", "holder."+names[i], l); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, name := range names {
		gs := order[name]
		sort.Slice(gs, func(a, b int) bool { return gs[a].fence < gs[b].fence })
		for j, g := range gs {
			if g.i != j {
				t.Errorf("%s %q: grants by fence came from waiters %v, want 0..%d in arrival order", k.name, name, gs, n-1)
				break
			}
		}
	}
	r := rc.check(t)
	t.Logf("%s FIFO: %d waiters (%v...) on %d Lockers (own ClusterClient each), on %d names one per shard, granted in arrival order; drain of all %v; checker: %s",
		k.name, n, k.seq[:3], n, len(names), elapsed.Round(time.Millisecond), r.Summary())
}

// testKindsCapacity runs 4 Lockers × 4 goroutines per name, one name per
// shard, looping the kind's mixed requests, a 1 ms hold and Release; every
// section adds its weight to a counter that must stay within the limit, and
// the checker verifies capacity, FIFO and fences from the history.
func testKindsCapacity(t *testing.T, k kind, c *redistest.Cluster, client func() redis.UniversalClient) {
	const lockers, perLocker, iters = 4, 4, 12
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ls := newLockers(t, lockers, client)
	names := namePerShard(t, c, "kcap-"+k.name)
	rc := recorded{newHistory()}
	limit, _ := k.all.permits()
	var mu sync.Mutex
	inUse, peak := map[string]int64{}, map[string]int64{}
	over := 0
	var wg sync.WaitGroup
	start := time.Now()
	for _, name := range names {
		for li := 0; li < lockers; li++ {
			for g := 0; g < perLocker; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := k.req(li*perLocker + g)
					_, weight := r.permits()
					proc := fmt.Sprintf("l%d", li)
					for i := 0; i < iters; i++ {
						w := fmt.Sprintf("%s.%s.g%d.%d", proc, name, g, i)
						lease, err := rc.acquire(ctx, ls[li], proc, w, name, r)
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						inUse[name] += weight
						if inUse[name] > limit {
							over++
						}
						peak[name] = max(peak[name], inUse[name])
						mu.Unlock()
						time.Sleep(time.Millisecond)
						mu.Lock()
						inUse[name] -= weight
						mu.Unlock()
						if err := rc.release(ctx, proc, w, lease); err != nil {
							t.Error(err)
						}
					}
				}()
			}
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	if over != 0 {
		t.Errorf("%d sections found more than %d permits held", over, limit)
	}
	r := rc.check(t)
	most := fmt.Sprintf("most permits held at once per name %v of %d", peak, limit)
	if k.name == "rw" {
		most = fmt.Sprintf("most readers at once %d", r.MaxHolders)
	}
	t.Logf("%s capacity: %d names (one per shard) × %d goroutines on %d Lockers, %d grants in %v (%.0f/s); over the limit %d times; %s; checker: %s",
		k.name, len(names), lockers*perLocker, lockers, r.Grants, elapsed.Round(time.Millisecond), float64(r.Grants)/elapsed.Seconds(), over, most, r.Summary())
}

// testKindsOneMessage grants five waiters on two Lockers in one release (a
// run of readers behind a writer, or 1-permit requests behind a full
// semaphore), and counts what Redis sent: a spy subscribed to every
// notification channel of the lock must see one message per Locker, listing
// all of its grants, sent by SPUBLISH in the lock's shard and never
// broadcast.
func testKindsOneMessage(t *testing.T, k kind, c *redistest.Cluster, client func() redis.UniversalClient) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ls := newLockers(t, 3, client)
	holder, lb, lc := ls[0], ls[1], ls[2]
	name := "batch-" + k.name
	small := readReq // fits many times beside itself
	if k.name == "sem" {
		small = semReq(k.all.Cap, 1)
	}
	owner := c.PrimaryFor(t, "{"+name+"}")
	node := redis.NewClient(&redis.Options{Addr: owner.Addr})
	defer node.Close()
	hold, err := acquirer(holder, k.all, name, false)
	if err != nil {
		t.Fatal(err)
	}
	h, err := hold(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// B, C, B, C, B: five waiters whose grants all fit at once.
	type result struct {
		locker string
		lease  *fairlock.Lease
		err    error
	}
	results := make(chan result, 5)
	waiters := []*fairlock.Locker{lb, lc, lb, lc, lb}
	if k.name == "sem" {
		waiters = waiters[:k.all.Cap] // a semaphore of 3 grants three 1-permit waiters
	}
	for i, l := range waiters {
		acquire, err := acquirer(l, small, name, false)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			lease, err := acquire(ctx)
			results <- result{map[*fairlock.Locker]string{lb: "B", lc: "C"}[l], lease, err}
		}()
		waitKindWaiters(t, holder, k, name, i+1)
	}
	// The lock's notification channels: one per Locker, in its slot.
	pattern := fmt.Sprintf("%s:{%s}:%s:notify:*", prefix, name, k.name)
	channels, err := node.Do(ctx, "PUBSUB", "SHARDCHANNELS", pattern).StringSlice()
	if err != nil || len(channels) < 2 {
		t.Fatalf("PUBSUB SHARDCHANNELS %s on %s: %v, %v; want the channels of Lockers B and C", pattern, owner.Addr, channels, err)
	}
	spy := node.SSubscribe(ctx, channels...)
	defer spy.Close()
	for range channels {
		if _, err := spy.Receive(ctx); err != nil {
			t.Fatalf("spy subscribe: %v", err)
		}
	}
	spublish0 := commandCalls(t, node, "spublish")
	pub0 := c.ClusterInfoSum(t, "cluster_stats_messages_publish_received")
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	perLocker := map[string]int{} // grants per Locker, by the tokens granted
	var leases []*fairlock.Lease
	for range waiters {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		perLocker[r.locker]++
		leases = append(leases, r.lease)
	}
	// Collect what the spy got until a quiet 200 ms.
	messages := map[string][]string{} // channel -> payloads
	for {
		mctx, mcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		msg, err := spy.ReceiveMessage(mctx)
		mcancel()
		if err != nil {
			break
		}
		messages[msg.Channel] = append(messages[msg.Channel], msg.Payload)
	}
	spublish := commandCalls(t, node, "spublish") - spublish0
	pub := c.ClusterInfoSum(t, "cluster_stats_messages_publish_received") - pub0
	for _, l := range leases {
		if err := l.Release(ctx); err != nil {
			t.Error(err)
		}
	}
	listed := 0      // grants the messages list: "token fence token fence ..."
	var got []string // per channel: messages (grants listed)
	for ch, ps := range messages {
		n := 0
		for _, p := range ps {
			n += len(strings.Fields(p)) / 2
		}
		listed += n
		got = append(got, fmt.Sprintf("%d (%d)", len(ps), n))
		if len(ps) > 1 {
			t.Errorf("channel %s got %d messages for one release, want 1: %q", ch, len(ps), ps)
		}
	}
	sort.Strings(got)
	t.Logf("%s: one release granted %d waiters (%s each) on Lockers %v: %d SPUBLISH calls on the shard; messages (grants listed) per Locker channel %v; %d broadcast PUBLISH bus messages",
		k.name, len(waiters), small, perLocker, spublish, got, pub)
	if len(messages) != len(perLocker) || listed != len(waiters) {
		t.Errorf("%d channels got messages listing %d grants; want one message for each of %d Lockers listing all %d grants", len(messages), listed, len(perLocker), len(waiters))
	}
	if spublish > int64(len(perLocker)) {
		t.Errorf("%d SPUBLISH calls for one release, want at most one per Locker (%d)", spublish, len(perLocker))
	}
	if pub != 0 {
		t.Errorf("%d broadcast PUBLISH bus messages: notifications must use SPUBLISH", pub)
	}
}

// commandCalls is INFO commandstats' call count of cmd on node (commands
// scripts call count too).
func commandCalls(t *testing.T, node *redis.Client, cmd string) int64 {
	t.Helper()
	info, err := node.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.ParseInt(strings.SplitN(v, ",", 2)[0], 10, 64)
			return n
		}
	}
	return 0
}
