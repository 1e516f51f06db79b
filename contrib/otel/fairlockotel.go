// Package fairlockotel turns the events of a fairlock.Locker into
// OpenTelemetry metrics: how long callers wait for a lock and how that
// ended, how long leases are held, how many are granted and lost, how many
// waiters this process has queued, and how often the heartbeat fails.
//
// It depends on the OpenTelemetry metric API only. The application chooses
// the SDK and the exporter (Prometheus, OTLP, stdout) and installs them as
// the global MeterProvider or passes one with WithMeterProvider:
//
//	m, err := fairlockotel.New()
//	if err != nil { ... }
//	locker, err := fairlock.New(rdb, m.Option())
//
// The instruments, all from the meter named ScopeName:
//
//	fairlock.acquire.wait       histogram, s        fairlock.outcome
//	fairlock.lease.hold         histogram, s        fairlock.lease.end
//	fairlock.lease.grants       counter, {grant}
//	fairlock.lease.lost         counter, {lease}
//	fairlock.waiters            up-down counter, {waiter}
//	fairlock.heartbeat.failures counter, {failure}
//
// fairlock.outcome is one of OutcomeGranted, OutcomeCancelled,
// OutcomeTimedOut, OutcomeClosed and OutcomeError; fairlock.lease.end is
// "released" or "lost". With WithLockName every instrument also gets
// fairlock.lock.name, and with WithGroup fairlock.group (a semaphore
// request's group, fairlock.WithGroup) and, for a weight other than 1,
// fairlock.group.weight (fairlock.WithGroupWeight); by default none does,
// because lock names and tenants are often unbounded (account:42) and each
// distinct value is a new time series. A request of a priority above 0
// (fairlock.WithPriority) always adds fairlock.priority: there are at most
// nine values. So does a part of a MultiMutex request (fairlock.Event.Multi)
// fairlock.multi, true: each of its mutexes' waits and holds is recorded as
// its own, and this tells them from single requests'.
//
// Observe only updates instruments in memory: it adds no Redis round trip
// and takes no lock of its own on the default path, so it keeps to the
// rule that an observer must not block. The instruments are as fast as the
// SDK behind them; the package's benchmarks measure both.
//
// The package is named fairlockotel, not otel, so that it can be imported
// beside go.opentelemetry.io/otel without renaming either.
package fairlockotel

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/fairlock/fairlock/fairlock"
)

// ScopeName is the instrumentation scope of the meter that holds the
// instruments.
const ScopeName = "github.com/fairlock/fairlock/contrib/otel"

// Attribute keys.
const (
	// OutcomeKey is the attribute of fairlock.acquire.wait that says how the
	// Acquire ended.
	OutcomeKey = attribute.Key("fairlock.outcome")
	// LeaseEndKey is the attribute of fairlock.lease.hold that says how the
	// lease ended: "released" or "lost".
	LeaseEndKey = attribute.Key("fairlock.lease.end")
	// LockNameKey is the attribute that carries the value WithLockName
	// maps a lock name to.
	LockNameKey = attribute.Key("fairlock.lock.name")
	// GroupKey is the attribute that carries the value WithGroup maps a
	// request's group to.
	GroupKey = attribute.Key("fairlock.group")
	// GroupWeightKey is the attribute that carries, beside GroupKey, the
	// weight a request gave its group (fairlock.WithGroupWeight) when it is
	// not 1.
	GroupWeightKey = attribute.Key("fairlock.group.weight")
	// PriorityKey is the attribute that carries a request's priority
	// (fairlock.WithPriority) when it is above 0.
	PriorityKey = attribute.Key("fairlock.priority")
	// MultiKey is the attribute, true, of the events of a part of a
	// MultiMutex request (fairlock.Event.Multi).
	MultiKey = attribute.Key("fairlock.multi")
	// LockKindKey is the attribute of every instrument that says which
	// kind of lock the event is about: the kind's name
	// (fairlock.LockKind.String: "mutex", "semaphore", "rwmutex",
	// "election"), or,
	// for a request of a kind that readers share (fairlock.KindInfo.Shared:
	// the read-write lock), "read" or "write"; "unknown" for a kind
	// fairlock.Kinds does not list. A read-write lock's failed heartbeat,
	// which is about no request, says "rwmutex".
	LockKindKey = attribute.Key("fairlock.lock.kind")
)

// The values of OutcomeKey. An Acquire (or TryAcquire) that reached Redis
// ends in exactly one of them; a waiter that lost its place and queued
// again (fairlock.ErrPlaceLost) is not an outcome and is not recorded.
const (
	OutcomeGranted   = "granted"   // it got the lease
	OutcomeCancelled = "cancelled" // its context was cancelled
	OutcomeTimedOut  = "timed_out" // its context's deadline passed
	OutcomeClosed    = "closed"    // the Locker was closed while it waited
	OutcomeError     = "error"     // Redis failed, or WithReplicaAck was not met
)

// WaitBuckets are the histogram bucket boundaries, in seconds, that
// fairlock.acquire.wait and fairlock.lease.hold advise: an uncontended
// grant takes a round trip, well under a millisecond on a LAN, and a
// contended one waits for the holders before it, up to tens of seconds.
// A View in the SDK overrides them.
var WaitBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
}

// An Option configures New.
type Option func(*config)

type config struct {
	provider metric.MeterProvider
	lockName func(string) string
	group    func(string) string
}

// WithMeterProvider makes the instruments with mp instead of the global
// MeterProvider (otel.GetMeterProvider). A nil mp means the global one.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.provider = mp }
}

// WithLockName adds the attribute fairlock.lock.name to every instrument,
// with the value fn returns for the event's lock name; an empty value
// leaves the attribute out for that lock. fn must be deterministic, so that
// a waiter counted up is counted down under the same attributes, and fast,
// as it runs on every event. Map unbounded names to a few classes, for
// example "account:42" to "account": every distinct value is a time series
// in each instrument. Without this option no instrument has a lock name.
func WithLockName(fn func(name string) string) Option {
	return func(c *config) { c.lockName = fn }
}

// WithGroup adds the attribute fairlock.group to every instrument of a
// semaphore request made with fairlock.WithGroup, with the value fn returns
// for the group, and fairlock.group.weight when the request weighs its
// group other than 1; an empty value leaves both out. As for WithLockName,
// fn must be deterministic and fast, and should map unbounded groups (one
// per customer) to a few classes.
func WithGroup(fn func(group string) string) Option {
	return func(c *config) { c.group = fn }
}

// Metrics holds the instruments. Its methods are safe for concurrent use,
// and one Metrics may observe several Lockers.
type Metrics struct {
	wait     metric.Float64Histogram
	hold     metric.Float64Histogram
	grants   metric.Int64Counter
	lost     metric.Int64Counter
	waiters  metric.Int64UpDownCounter
	failures metric.Int64Counter

	lockName, group func(string) string
	// By kindOf's index: the sets of events whose lock name and group map
	// to no attribute, and the mapped labels -> *attrSets of the others.
	unnamed []*attrSets
	named   []sync.Map
}

// labels are the mapped values of the optional attributes.
type labels struct {
	name, group string
	weight      int // with group: a weight other than 1, else 0
	priority    int
	multi       bool
}

// kindNames are the values of LockKindKey, indexed by kindOf, and
// kindSlots where each kind's are, by fairlock.LockKind: see labelKinds.
var kindNames, kindSlots = labelKinds()

// The indexes in kindNames of one kind's values: its name, and its
// requests' events' when they read or write; a zero one is "unknown"'s.
type slots struct{ whole, read, write int }

// labelKinds lists the values of LockKindKey: "unknown", then each of
// fairlock.Kinds by its name, followed by "read" and "write" for a kind
// whose requests may share a lock. A slice indexed by the kind, not a
// map, keeps kindOf as cheap as a switch.
func labelKinds() ([]string, []slots) {
	names := []string{"unknown"}
	var byKind []slots
	for _, kd := range fairlock.Kinds() {
		s := slots{len(names), len(names), len(names)}
		names = append(names, kd.Lock.String())
		if kd.Shared {
			s.read, s.write = len(names), len(names)+1
			names = append(names, "read", "write")
		}
		if k := int(kd.Lock); k >= len(byKind) {
			byKind = append(byKind, make([]slots, k+1-len(byKind))...)
		}
		byKind[kd.Lock] = s
	}
	return names, byKind
}

// kindOf is the index in kindNames of what e is about: a reader or writer
// for the requests' events of a kind whose requests may share a lock, the
// kind as a whole for its failed heartbeats, which name no token.
func kindOf(e fairlock.Event) int {
	var s slots
	if k := int(e.Lock); k >= 0 && k < len(kindSlots) {
		s = kindSlots[k]
	}
	switch {
	case e.Token == "":
		return s.whole
	case e.Shared:
		return s.read
	}
	return s.write
}

// attrSets are the measurement options for one value of the lock-name
// attribute, built once so that recording allocates nothing.
type attrSets struct {
	outcome  [numOutcomes][]metric.RecordOption
	released []metric.RecordOption
	lostEnd  []metric.RecordOption
	add      []metric.AddOption
}

// outcome indexes attrSets.outcome.
type outcome int

const (
	granted outcome = iota
	cancelled
	timedOut
	closed
	failed
	numOutcomes
)

var outcomeNames = [numOutcomes]string{OutcomeGranted, OutcomeCancelled, OutcomeTimedOut, OutcomeClosed, OutcomeError}

// New makes the instruments. It fails only if the MeterProvider refuses
// one of them; the Metrics is then still usable, with a no-op instrument in
// place of each refused one, as the OpenTelemetry API provides.
func New(opts ...Option) (*Metrics, error) {
	var c config
	for _, opt := range opts {
		if opt != nil {
			opt(&c)
		}
	}
	if c.provider == nil {
		c.provider = otel.GetMeterProvider()
	}
	meter := c.provider.Meter(ScopeName)
	m := &Metrics{lockName: c.lockName, group: c.group, unnamed: make([]*attrSets, len(kindNames)), named: make([]sync.Map, len(kindNames))}
	for k := range m.unnamed {
		m.unnamed[k] = newAttrSets([]attribute.KeyValue{LockKindKey.String(kindNames[k])})
	}
	var err, e error
	m.wait, e = meter.Float64Histogram("fairlock.acquire.wait",
		metric.WithDescription("Time from an Acquire call to its outcome: the grant, or giving up."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(WaitBuckets...))
	err = errors.Join(err, e)
	m.hold, e = meter.Float64Histogram("fairlock.lease.hold",
		metric.WithDescription("Time from a grant to the lease's release or loss."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(WaitBuckets...))
	err = errors.Join(err, e)
	m.grants, e = meter.Int64Counter("fairlock.lease.grants",
		metric.WithDescription("Leases granted."), metric.WithUnit("{grant}"))
	err = errors.Join(err, e)
	m.lost, e = meter.Int64Counter("fairlock.lease.lost",
		metric.WithDescription("Leases lost: not renewed in time, or no longer known to Redis."), metric.WithUnit("{lease}"))
	err = errors.Join(err, e)
	m.waiters, e = meter.Int64UpDownCounter("fairlock.waiters",
		metric.WithDescription("Waiters of this process queued for a lock."), metric.WithUnit("{waiter}"))
	err = errors.Join(err, e)
	m.failures, e = meter.Int64Counter("fairlock.heartbeat.failures",
		metric.WithDescription("Heartbeat calls to Redis that failed."), metric.WithUnit("{failure}"))
	err = errors.Join(err, e)
	return m, err
}

func newAttrSets(extra []attribute.KeyValue) *attrSets {
	record := func(kv ...attribute.KeyValue) []metric.RecordOption {
		return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(append(kv, extra...)...))}
	}
	s := &attrSets{
		released: record(LeaseEndKey.String("released")),
		lostEnd:  record(LeaseEndKey.String("lost")),
		add:      []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(extra...))},
	}
	for i, name := range outcomeNames {
		s.outcome[i] = record(OutcomeKey.String(name))
	}
	return s
}

// Option returns the fairlock option that installs m as a Locker's
// observer. A Locker has one observer; to feed m and something else, pass
// fairlock.WithObserver a function that calls m.Observe and the other.
func (m *Metrics) Option() fairlock.Option { return fairlock.WithObserver(m.Observe) }

// Observe records one event. It is a fairlock observer: pass it to
// fairlock.WithObserver, or use m.Option.
func (m *Metrics) Observe(e fairlock.Event) {
	ctx := context.Background()
	switch e.Kind {
	case fairlock.EventEnqueued:
		m.waiters.Add(ctx, 1, m.sets(e).add...)
	case fairlock.EventGranted:
		s := m.sets(e)
		if e.Queued {
			m.waiters.Add(ctx, -1, s.add...)
		}
		m.grants.Add(ctx, 1, s.add...)
		m.wait.Record(ctx, e.Wait.Seconds(), s.outcome[granted]...)
	case fairlock.EventCancelled:
		s := m.sets(e)
		if e.Queued {
			m.waiters.Add(ctx, -1, s.add...)
		}
		if o, final := outcomeOf(e.Err); final {
			m.wait.Record(ctx, e.Wait.Seconds(), s.outcome[o]...)
		}
	case fairlock.EventReleased:
		m.hold.Record(ctx, e.Held.Seconds(), m.sets(e).released...)
	case fairlock.EventLost:
		s := m.sets(e)
		m.lost.Add(ctx, 1, s.add...)
		m.hold.Record(ctx, e.Held.Seconds(), s.lostEnd...)
	case fairlock.EventHeartbeatFailed:
		m.failures.Add(ctx, 1, m.sets(e).add...)
	}
}

// outcomeOf maps the Err of an EventCancelled to its outcome. final is
// false for a waiter that lost its place and queues again: its Acquire goes
// on. The context's errors come first, since a failed withdrawal from the
// queue is joined to them and does not change why the caller gave up.
func outcomeOf(err error) (o outcome, final bool) {
	switch {
	case errors.Is(err, fairlock.ErrPlaceLost):
		return 0, false
	case errors.Is(err, context.DeadlineExceeded):
		return timedOut, true
	case errors.Is(err, context.Canceled):
		return cancelled, true
	case errors.Is(err, fairlock.ErrClosed):
		return closed, true
	}
	return failed, true
}

// sets returns the measurement options for e's lock kind, name and group.
func (m *Metrics) sets(e fairlock.Event) *attrSets {
	kind := kindOf(e)
	var l labels
	if m.lockName != nil {
		l.name = m.lockName(e.Name)
	}
	if m.group != nil && e.Group != "" {
		l.group = m.group(e.Group)
		if l.group != "" && e.Weight > 1 {
			l.weight = e.Weight
		}
	}
	l.priority = e.Priority
	l.multi = e.Multi != ""
	if l == (labels{}) {
		return m.unnamed[kind]
	}
	if s, ok := m.named[kind].Load(l); ok {
		return s.(*attrSets)
	}
	kv := []attribute.KeyValue{LockKindKey.String(kindNames[kind])}
	if l.name != "" {
		kv = append(kv, LockNameKey.String(l.name))
	}
	if l.group != "" {
		kv = append(kv, GroupKey.String(l.group))
	}
	if l.weight > 0 {
		kv = append(kv, GroupWeightKey.Int(l.weight))
	}
	if l.priority > 0 {
		kv = append(kv, PriorityKey.Int(l.priority))
	}
	if l.multi {
		kv = append(kv, MultiKey.Bool(true))
	}
	s, _ := m.named[kind].LoadOrStore(l, newAttrSets(kv))
	return s.(*attrSets)
}
