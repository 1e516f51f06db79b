package fairlockotel_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	fairlockotel "github.com/fairlock/fairlock/contrib/otel"
	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/fairlock/fairlocktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newMetrics returns Metrics on an SDK MeterProvider read by hand.
func newMetrics(t testing.TB, opts ...fairlockotel.Option) (*fairlockotel.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	m, err := fairlockotel.New(append([]fairlockotel.Option{fairlockotel.WithMeterProvider(mp)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return m, reader
}

// collected is one collection, indexed by instrument name.
type collected map[string]metricdata.Metrics

func collect(t testing.TB, r *sdkmetric.ManualReader) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := collected{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != fairlockotel.ScopeName {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// withKind adds fairlock.lock.kind "mutex" to kv, unless kv has a kind.
func withKind(kv []attribute.KeyValue) attribute.Set {
	for _, a := range kv {
		if a.Key == fairlockotel.LockKindKey {
			return attribute.NewSet(kv...)
		}
	}
	return attribute.NewSet(append(kv, fairlockotel.LockKindKey.String("mutex"))...)
}

// hist returns the data point of a histogram with exactly these attributes,
// and the kind "mutex" unless they name one.
func (c collected) hist(t testing.TB, name string, kv ...attribute.KeyValue) metricdata.HistogramDataPoint[float64] {
	t.Helper()
	want := withKind(kv)
	m, ok := c[name]
	if !ok {
		t.Fatalf("no instrument %s", name)
	}
	if m.Unit != "s" {
		t.Errorf("%s: unit %q, want s", name, m.Unit)
	}
	for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
		if p.Attributes.Equals(&want) {
			return p
		}
	}
	return metricdata.HistogramDataPoint[float64]{}
}

// sum returns the value of a counter or up-down counter with exactly these
// attributes (and the kind "mutex" unless they name one), and whether it has
// such a point.
func (c collected) sum(t testing.TB, name string, kv ...attribute.KeyValue) (int64, bool) {
	t.Helper()
	want := withKind(kv)
	m, ok := c[name]
	if !ok {
		return 0, false
	}
	for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
		if p.Attributes.Equals(&want) {
			return p.Value, true
		}
	}
	return 0, false
}

func outcome(o string) attribute.KeyValue { return fairlockotel.OutcomeKey.String(o) }

var (
	released = fairlockotel.LeaseEndKey.String("released")
	lost     = fairlockotel.LeaseEndKey.String("lost")
)

// The outcome mapping and the waiter count, from events made by hand.
func TestObserveMapsEvents(t *testing.T) {
	m, r := newMetrics(t)
	ms := time.Millisecond
	redisErr := errors.New("READONLY You can't write against a read only replica")
	for _, e := range []fairlock.Event{
		{Kind: fairlock.EventGranted, Wait: 1 * ms}, // uncontended: never queued
		{Kind: fairlock.EventEnqueued, Position: 1},
		{Kind: fairlock.EventEnqueued, Position: 2},
		{Kind: fairlock.EventEnqueued, Position: 3},
		{Kind: fairlock.EventEnqueued, Position: 4},
		{Kind: fairlock.EventEnqueued, Position: 5},
		{Kind: fairlock.EventGranted, Wait: 20 * ms, Queued: true},
		{Kind: fairlock.EventCancelled, Wait: 30 * ms, Queued: true, Err: context.Canceled},
		{Kind: fairlock.EventCancelled, Wait: 40 * ms, Queued: true, Err: fmt.Errorf("%w (i/o timeout)", context.DeadlineExceeded)},
		{Kind: fairlock.EventCancelled, Wait: 50 * ms, Queued: true, Err: fairlock.ErrClosed},
		{Kind: fairlock.EventCancelled, Wait: 60 * ms, Queued: true, Err: fairlock.ErrPlaceLost}, // queues again
		{Kind: fairlock.EventCancelled, Wait: 70 * ms, Queued: false, Err: redisErr},             // enqueue failed
		{Kind: fairlock.EventCancelled, Wait: 80 * ms, Queued: false, Err: errors.Join(context.Canceled, redisErr)},
		{Kind: fairlock.EventReleased, Held: 5 * ms, Err: fairlock.ErrReleased},
		{Kind: fairlock.EventLost, Held: 10 * time.Second, Err: fairlock.ErrLost},
		{Kind: fairlock.EventRenewed},
		{Kind: fairlock.EventHeartbeatFailed, Err: redisErr},
	} {
		e.Name, e.Lock = "account:42", fairlock.LockMutex
		m.Observe(e)
	}
	c := collect(t, r)
	for _, w := range []struct {
		outcome string
		count   uint64
		sum     float64
	}{
		{fairlockotel.OutcomeGranted, 2, 0.021},
		{fairlockotel.OutcomeCancelled, 2, 0.110},
		{fairlockotel.OutcomeTimedOut, 1, 0.040},
		{fairlockotel.OutcomeClosed, 1, 0.050},
		{fairlockotel.OutcomeError, 1, 0.070},
	} {
		p := c.hist(t, "fairlock.acquire.wait", outcome(w.outcome))
		if p.Count != w.count || math.Abs(p.Sum-w.sum) > 1e-9 {
			t.Errorf("wait{outcome=%s}: count %d sum %g, want %d and %g", w.outcome, p.Count, p.Sum, w.count, w.sum)
		}
	}
	if p := c.hist(t, "fairlock.acquire.wait", outcome(fairlockotel.OutcomeGranted)); len(p.Bounds) != len(fairlockotel.WaitBuckets) {
		t.Errorf("wait buckets %v, want the advised %v", p.Bounds, fairlockotel.WaitBuckets)
	}
	if p := c.hist(t, "fairlock.lease.hold", released); p.Count != 1 || p.Sum != 0.005 {
		t.Errorf("hold{released}: %d %g", p.Count, p.Sum)
	}
	if p := c.hist(t, "fairlock.lease.hold", lost); p.Count != 1 || p.Sum != 10 {
		t.Errorf("hold{lost}: %d %g", p.Count, p.Sum)
	}
	for name, want := range map[string]int64{
		"fairlock.lease.grants":       2,
		"fairlock.lease.lost":         1,
		"fairlock.heartbeat.failures": 1,
		"fairlock.waiters":            0, // five queued, five left (one to queue again)
	} {
		if got, ok := c.sum(t, name); !ok || got != want {
			t.Errorf("%s = %d (present %v), want %d", name, got, ok, want)
		}
	}
	if u := c["fairlock.lease.grants"].Unit; u != "{grant}" {
		t.Errorf("grants unit %q", u)
	}
}

func TestLockNameIsOptIn(t *testing.T) {
	m, r := newMetrics(t, fairlockotel.WithLockName(func(name string) string {
		if name == "reports" {
			return name
		}
		return "" // everything else: no lock-name attribute
	}))
	for _, name := range []string{"reports", "account:1", "account:2"} {
		m.Observe(fairlock.Event{Kind: fairlock.EventGranted, Name: name, Lock: fairlock.LockMutex, Wait: time.Millisecond})
	}
	c := collect(t, r)
	named := fairlockotel.LockNameKey.String("reports")
	if p := c.hist(t, "fairlock.acquire.wait", outcome(fairlockotel.OutcomeGranted), named); p.Count != 1 {
		t.Errorf("wait{reports}: count %d, want 1", p.Count)
	}
	if p := c.hist(t, "fairlock.acquire.wait", outcome(fairlockotel.OutcomeGranted)); p.Count != 2 {
		t.Errorf("wait without a name: count %d, want 2", p.Count)
	}
	if n, _ := c.sum(t, "fairlock.lease.grants", named); n != 1 {
		t.Errorf("grants{reports} = %d", n)
	}

	// The default has no lock name at all.
	m, r = newMetrics(t)
	m.Observe(fairlock.Event{Kind: fairlock.EventGranted, Name: "account:1"})
	for _, p := range collect(t, r)["fairlock.acquire.wait"].Data.(metricdata.Histogram[float64]).DataPoints {
		if _, ok := p.Attributes.Value(fairlockotel.LockNameKey); ok {
			t.Errorf("default Metrics has a lock name: %v", p.Attributes)
		}
	}
}

// A semaphore request's group is an attribute only with WithGroup, as the
// mapping returns it, alone or beside the lock name; its weight too, when
// not 1.
func TestGroupIsOptIn(t *testing.T) {
	sem := fairlockotel.LockKindKey.String("semaphore")
	m, r := newMetrics(t, fairlockotel.WithGroup(func(g string) string { return "tier-" + g[:1] }),
		fairlockotel.WithLockName(func(name string) string { return name }))
	for _, g := range []string{"a1", "a2", "b1", ""} {
		m.Observe(fairlock.Event{Kind: fairlock.EventGranted, Name: "exports", Lock: fairlock.LockSemaphore, Group: g, Weight: min(len(g), 1)})
	}
	m.Observe(fairlock.Event{Kind: fairlock.EventGranted, Name: "exports", Lock: fairlock.LockSemaphore, Group: "a3", Weight: 4})
	c := collect(t, r)
	name := fairlockotel.LockNameKey.String("exports")
	for group, want := range map[string]int64{"tier-a": 2, "tier-b": 1} {
		if n, _ := c.sum(t, "fairlock.lease.grants", sem, name, fairlockotel.GroupKey.String(group)); n != want {
			t.Errorf("grants{group=%s} = %d, want %d", group, n, want)
		}
	}
	if n, _ := c.sum(t, "fairlock.lease.grants", sem, name, fairlockotel.GroupKey.String("tier-a"), fairlockotel.GroupWeightKey.Int(4)); n != 1 {
		t.Errorf("grants{group=tier-a, weight=4} = %d, want 1", n)
	}
	if n, _ := c.sum(t, "fairlock.lease.grants", sem, name); n != 1 {
		t.Errorf("grants without a group = %d, want 1", n)
	}
	m, r = newMetrics(t)
	m.Observe(fairlock.Event{Kind: fairlock.EventGranted, Lock: fairlock.LockSemaphore, Group: "a1"})
	if n, _ := collect(t, r).sum(t, "fairlock.lease.grants", sem); n != 1 {
		t.Errorf("default Metrics: grants = %d, want 1 with no group attribute", n)
	}
}

// A priority above 0 is always an attribute: it has at most nine values.
func TestPriorityAttribute(t *testing.T) {
	m, r := newMetrics(t)
	for _, p := range []int{0, 3, 3, 9} {
		m.Observe(fairlock.Event{Kind: fairlock.EventGranted, Lock: fairlock.LockMutex, Priority: p})
	}
	c := collect(t, r)
	mutex := fairlockotel.LockKindKey.String("mutex")
	for p, want := range map[int]int64{3: 2, 9: 1} {
		if n, _ := c.sum(t, "fairlock.lease.grants", mutex, fairlockotel.PriorityKey.Int(p)); n != want {
			t.Errorf("grants{priority=%d} = %d, want %d", p, n, want)
		}
	}
	if n, _ := c.sum(t, "fairlock.lease.grants", mutex); n != 1 {
		t.Errorf("grants without a priority = %d, want 1", n)
	}
}

// A part of a MultiMutex request is marked fairlock.multi, whatever its
// request's label (Event.Multi, one per request) is: two values only.
func TestMultiAttribute(t *testing.T) {
	m, r := newMetrics(t)
	for _, multi := range []string{"", "x&1", "x&1", "y&7"} {
		m.Observe(fairlock.Event{Kind: fairlock.EventGranted, Lock: fairlock.LockMutex, Multi: multi})
	}
	c := collect(t, r)
	mutex := fairlockotel.LockKindKey.String("mutex")
	if n, _ := c.sum(t, "fairlock.lease.grants", mutex, fairlockotel.MultiKey.Bool(true)); n != 3 {
		t.Errorf("grants{multi=true} = %d, want 3", n)
	}
	if n, _ := c.sum(t, "fairlock.lease.grants", mutex); n != 1 {
		t.Errorf("grants of single requests = %d, want 1", n)
	}
}

// Each kind of lock is its own series; an event of no known kind is
// "unknown".
func TestLockKindAttribute(t *testing.T) {
	m, r := newMetrics(t)
	for _, e := range []fairlock.Event{{Lock: fairlock.LockSemaphore}, {Lock: fairlock.LockSemaphore},
		{Lock: fairlock.LockRWMutex, Shared: true, Token: "r"}, {Lock: fairlock.LockRWMutex, Token: "w"},
		{Lock: fairlock.LockRWMutex}, {Lock: 0}, {Lock: 99}} {
		e.Kind, e.Permits = fairlock.EventGranted, 2
		m.Observe(e)
	}
	c := collect(t, r)
	for kind, want := range map[string]int64{"semaphore": 2, "read": 1, "write": 1, "rwmutex": 1, "unknown": 2, "mutex": 0} {
		if n, _ := c.sum(t, "fairlock.lease.grants", fairlockotel.LockKindKey.String(kind)); n != want {
			t.Errorf("grants{kind=%s} = %d, want %d", kind, n, want)
		}
	}
}

// A Locker on miniredis, through every outcome the instruments tell apart.
func TestLockerOutcomes(t *testing.T) {
	m, r := newMetrics(t)
	srv := fairlocktest.NewServer(t)
	const ttl = 300 * time.Millisecond // heartbeat 100 ms
	opts := []fairlock.Option{fairlock.WithLeaseTTL(ttl), fairlock.WithWaiterTTL(ttl), m.Option()}
	a, b := srv.Locker(t, opts...), srv.Locker(t, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// An uncontended grant, and one that queues behind it for 50 ms.
	held, err := a.Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan struct{})
	next := make(chan *fairlock.Lease, 1)
	go func() {
		s, err := b.Acquire(ctx, "job", fairlock.OnQueued(func(int) { close(queued) }))
		if err != nil {
			t.Error(err)
		}
		next <- s
	}()
	<-queued
	if n, _ := collect(t, r).sum(t, "fairlock.waiters"); n != 1 {
		t.Errorf("waiters while one waits: %d, want 1", n)
	}
	time.Sleep(50 * time.Millisecond)
	held.Release(ctx)
	s := <-next

	// While b holds the lock: one Acquire cancelled, one timed out.
	cctx, stop := context.WithCancel(ctx)
	time.AfterFunc(20*time.Millisecond, stop)
	if _, err := a.Acquire(cctx, "job"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Acquire: %v", err)
	}
	tctx, stop2 := context.WithTimeout(ctx, 30*time.Millisecond)
	defer stop2()
	if _, err := a.Acquire(tctx, "job"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timed-out Acquire: %v", err)
	}
	s.Release(ctx)

	// A lease lost: someone else's token in the lock key.
	gone, err := a.Acquire(ctx, "gone")
	if err != nil {
		t.Fatal(err)
	}
	srv.Miniredis().Set("fairlock:{gone}:lock", "someone-else")
	select {
	case <-gone.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("lease not lost")
	}

	// A failed heartbeat: Redis refuses every command for a while.
	beat, err := a.Acquire(ctx, "beat")
	if err != nil {
		t.Fatal(err)
	}
	srv.Miniredis().SetError("ERR injected")
	deadline := time.Now().Add(2 * time.Second)
	for {
		if n, _ := collect(t, r).sum(t, "fairlock.heartbeat.failures"); n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no heartbeat failure counted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	srv.Miniredis().SetError("")
	beat.Release(ctx) //nolint:errcheck // ErrNotHeld if the failures outlasted the lease

	c := collect(t, r)
	if p := c.hist(t, "fairlock.acquire.wait", outcome(fairlockotel.OutcomeGranted)); p.Count != 4 || value(p.Max) < 0.05 {
		t.Errorf("granted waits: count %d max %v, want 4 and one >= 50ms", p.Count, p.Max)
	}
	if p := c.hist(t, "fairlock.acquire.wait", outcome(fairlockotel.OutcomeCancelled)); p.Count != 1 || p.Sum < 0.02 {
		t.Errorf("cancelled waits: count %d sum %g", p.Count, p.Sum)
	}
	if p := c.hist(t, "fairlock.acquire.wait", outcome(fairlockotel.OutcomeTimedOut)); p.Count != 1 || p.Sum < 0.03 {
		t.Errorf("timed-out waits: count %d sum %g", p.Count, p.Sum)
	}
	if n, _ := c.sum(t, "fairlock.lease.grants"); n != 4 {
		t.Errorf("grants %d, want 4", n)
	}
	if n, _ := c.sum(t, "fairlock.waiters"); n != 0 {
		t.Errorf("waiters at the end: %d, want 0", n)
	}
	lostN, _ := c.sum(t, "fairlock.lease.lost")
	hr, hl := c.hist(t, "fairlock.lease.hold", released), c.hist(t, "fairlock.lease.hold", lost)
	if lostN < 1 || hl.Count != uint64(lostN) || hr.Count+hl.Count != 4 {
		t.Errorf("lost %d, hold released %d lost %d: want every grant to end once, at least one lost", lostN, hr.Count, hl.Count)
	}
	// The first lease was held 50 ms; the lease released after a failed
	// heartbeat may have been held less (the failure can come at once).
	if value(hr.Max) < 0.05 {
		t.Errorf("longest release hold %v, want the first lease's 50ms or more", hr.Max)
	}
}

func value(e metricdata.Extrema[float64]) float64 {
	v, _ := e.Value()
	return v
}

func TestNewUsesTheGlobalProvider(t *testing.T) {
	m, err := fairlockotel.New(fairlockotel.WithMeterProvider(nil))
	if err != nil {
		t.Fatal(err)
	}
	m.Observe(fairlock.Event{Kind: fairlock.EventGranted}) // the global no-op provider takes it
}
