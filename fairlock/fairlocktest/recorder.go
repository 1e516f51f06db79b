package fairlocktest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/fairlock/fairlock/fairlock"
)

// Recorder collects the events of one or more Lockers, in the order the
// Lockers report them. Install it with rec.Option() when making each
// Locker. It is safe for concurrent use, and its Record never blocks for
// long, as an observer must not.
type Recorder struct {
	mu      sync.Mutex
	events  []fairlock.Event
	changed chan struct{} // closed and replaced on every event
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{changed: make(chan struct{})}
}

// Option installs the Recorder as a Locker's observer.
func (r *Recorder) Option() fairlock.Option { return fairlock.WithObserver(r.Record) }

// Record appends e. It is the observer function.
func (r *Recorder) Record(e fairlock.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// Events returns a copy of every event so far.
func (r *Recorder) Events() []fairlock.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Reset forgets every event so far.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.events = nil
	r.mu.Unlock()
}

// Filter returns the events of lock name with the given kind, in order.
func (r *Recorder) Filter(name string, kind fairlock.EventKind) []fairlock.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []fairlock.Event
	for _, e := range r.events {
		if e.Name == name && e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// Granted returns the tokens that were granted lock name, in grant order.
// Compare them with Lease.Token.
func (r *Recorder) Granted(name string) []string {
	return tokens(r.Filter(name, fairlock.EventGranted))
}

// Enqueued returns the tokens that queued for lock name, in the order the
// Recorder saw them queue. A waiter that found the lock free and was
// granted at once never queued and is not listed.
func (r *Recorder) Enqueued(name string) []string {
	return tokens(r.Filter(name, fairlock.EventEnqueued))
}

// Wait blocks until at least n events of kind were recorded for lock name,
// or ctx ends. Use it to sequence a test: start waiter A, Wait for one
// EventEnqueued, start waiter B, Wait for two, and so on.
func (r *Recorder) Wait(ctx context.Context, name string, kind fairlock.EventKind, n int) error {
	for {
		r.mu.Lock()
		got := 0
		for _, e := range r.events {
			if e.Name == name && e.Kind == kind {
				got++
			}
		}
		changed := r.changed
		r.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("fairlocktest: waiting for %d %v events on %q, saw %d: %w", n, kind, name, got, ctx.Err())
		}
	}
}

// CheckFIFO reports an error unless lock name was granted to its queued
// waiters in the order they queued. Waiters that never got the lock
// (cancelled, or evicted for silence) are left out of the comparison.
//
// The queue order that counts is the order enqueues reached Redis; the
// Recorder sees the order the Lockers reported them. The two agree when the
// test lets each waiter queue before starting the next (see Wait), which is
// what a test of ordering should do anyway.
func (r *Recorder) CheckFIFO(name string) error {
	queued, granted := r.Enqueued(name), r.Granted(name)
	inQueue := map[string]bool{}
	for _, t := range queued {
		inQueue[t] = true
	}
	wasGranted := map[string]bool{}
	for _, t := range granted {
		wasGranted[t] = true
	}
	var want, got []string
	seen := map[string]bool{}
	for _, t := range queued {
		if wasGranted[t] && !seen[t] { // a waiter evicted for silence queues again
			seen[t] = true
			want = append(want, t)
		}
	}
	for _, t := range granted {
		if inQueue[t] {
			got = append(got, t)
		}
	}
	if !slices.Equal(want, got) {
		return fmt.Errorf("fairlocktest: %q granted out of queue order:\n queued  %v\n granted %v", name, want, got)
	}
	return nil
}

// CheckGrantOrder reports an error unless the grants of lock name, in
// order, were to exactly these tokens.
func (r *Recorder) CheckGrantOrder(name string, tokens ...string) error {
	if got := r.Granted(name); !slices.Equal(got, tokens) {
		return fmt.Errorf("fairlocktest: %q grant order:\n got  %v\n want %v", name, got, tokens)
	}
	return nil
}

// CheckFences reports an error unless the fences of lock name's grants
// strictly increase.
func (r *Recorder) CheckFences(name string) error {
	grants := r.Filter(name, fairlock.EventGranted)
	for i := 1; i < len(grants); i++ {
		if grants[i].Fence <= grants[i-1].Fence {
			return fmt.Errorf("fairlocktest: %q fence went from %d (%s) to %d (%s)", name,
				grants[i-1].Fence, grants[i-1].Token, grants[i].Fence, grants[i].Token)
		}
	}
	return nil
}

// AssertFIFO fails the test if CheckFIFO reports an error.
func (r *Recorder) AssertFIFO(t testing.TB, name string) {
	t.Helper()
	if err := r.CheckFIFO(name); err != nil {
		t.Error(err)
	}
}

// AssertGrantOrder fails the test if CheckGrantOrder reports an error.
func (r *Recorder) AssertGrantOrder(t testing.TB, name string, tokens ...string) {
	t.Helper()
	if err := r.CheckGrantOrder(name, tokens...); err != nil {
		t.Error(err)
	}
}

// AssertFences fails the test if CheckFences reports an error.
func (r *Recorder) AssertFences(t testing.TB, name string) {
	t.Helper()
	if err := r.CheckFences(name); err != nil {
		t.Error(err)
	}
}

func tokens(events []fairlock.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Token
	}
	return out
}
