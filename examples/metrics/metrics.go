package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fairlock/fairlock/fairlock"
)

// waitBuckets are the upper bounds, in seconds, of the wait histogram.
var waitBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10}

// Metrics turns fairlock events into Prometheus metrics. Its Observe method
// is the observer: it only updates counters under a mutex, so it never
// blocks the Locker and costs no Redis round trip.
//
// Every lock name becomes a label value. That is right for a fixed set of
// locks; if names are unbounded (one per user, say), map them to a few
// classes before they reach a label.
type Metrics struct {
	mu     sync.Mutex
	events map[eventKey]uint64
	waits  map[string]*histogram // by lock name
}

type eventKey struct {
	lock string
	kind fairlock.EventKind
}

type histogram struct {
	counts []uint64 // per bucket, not cumulative; the last is +Inf
	sum    float64
	n      uint64
}

// NewMetrics returns empty metrics. Pass m.Observe to fairlock.WithObserver.
func NewMetrics() *Metrics {
	return &Metrics{events: map[eventKey]uint64{}, waits: map[string]*histogram{}}
}

// Observe records one event.
func (m *Metrics) Observe(e fairlock.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events[eventKey{e.Name, e.Kind}]++
	if e.Kind != fairlock.EventGranted {
		return
	}
	h := m.waits[e.Name]
	if h == nil {
		h = &histogram{counts: make([]uint64, len(waitBuckets)+1)}
		m.waits[e.Name] = h
	}
	s := e.Wait.Seconds()
	i, _ := slices.BinarySearch(waitBuckets, s) // first bucket with bound >= s
	h.counts[i]++
	h.sum += s
	h.n++
}

// Gauges reports the state of some locks at scrape time, from Inspect: who
// holds them and how long their queues are. Unlike the event counters this
// costs one Redis call per lock and scrape.
type Gauges struct {
	Locker *fairlock.Locker
	Locks  []string
}

// WriteTo writes every metric in the Prometheus text exposition format
// (version 0.0.4), sorted, so the output is stable.
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	m.mu.Lock()
	b.WriteString("# HELP fairlock_events_total Lock events seen by this process, by lock and kind.\n")
	b.WriteString("# TYPE fairlock_events_total counter\n")
	keys := make([]eventKey, 0, len(m.events))
	for k := range m.events {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b eventKey) int {
		return strings.Compare(a.lock+"\x00"+a.kind.String(), b.lock+"\x00"+b.kind.String())
	})
	for _, k := range keys {
		fmt.Fprintf(&b, "fairlock_events_total{lock=%s,event=%s} %d\n", quote(k.lock), quote(k.kind.String()), m.events[k])
	}
	b.WriteString("# HELP fairlock_wait_seconds Time from the Acquire call to the grant.\n")
	b.WriteString("# TYPE fairlock_wait_seconds histogram\n")
	locks := make([]string, 0, len(m.waits))
	for l := range m.waits {
		locks = append(locks, l)
	}
	slices.Sort(locks)
	for _, l := range locks {
		h := m.waits[l]
		var cum uint64
		for i, c := range h.counts {
			cum += c
			le := "+Inf"
			if i < len(waitBuckets) {
				le = fmt.Sprint(waitBuckets[i])
			}
			fmt.Fprintf(&b, "fairlock_wait_seconds_bucket{lock=%s,le=%q} %d\n", quote(l), le, cum)
		}
		fmt.Fprintf(&b, "fairlock_wait_seconds_sum{lock=%s} %g\n", quote(l), h.sum)
		fmt.Fprintf(&b, "fairlock_wait_seconds_count{lock=%s} %d\n", quote(l), h.n)
	}
	m.mu.Unlock()
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// Write inspects the locks and writes the gauges in the text exposition format.
func (g Gauges) Write(ctx context.Context, w io.Writer) error {
	var b strings.Builder
	b.WriteString("# HELP fairlock_waiters Live waiters queued for the lock.\n# TYPE fairlock_waiters gauge\n")
	var held strings.Builder
	held.WriteString("# HELP fairlock_held 1 if the lock is held.\n# TYPE fairlock_held gauge\n")
	for _, l := range g.Locks {
		st, err := g.Locker.Inspect(ctx, l)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "fairlock_waiters{lock=%s} %d\n", quote(l), st.Waiters)
		h := 0
		if st.Held {
			h = 1
		}
		fmt.Fprintf(&held, "fairlock_held{lock=%s} %d\n", quote(l), h)
	}
	_, err := io.WriteString(w, b.String()+held.String())
	return err
}

// Handler serves the metrics for a Prometheus scraper.
func Handler(m *Metrics, g Gauges) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		m.WriteTo(w) //nolint:errcheck // the client went away
		if err := g.Write(ctx, w); err != nil {
			fmt.Fprintf(w, "# inspect failed: %v\n", err)
		}
	})
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// quote makes a label value: backslash, double quote and newline escaped.
func quote(s string) string { return `"` + labelEscaper.Replace(s) + `"` }
