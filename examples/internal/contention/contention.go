// Package contention is the harness of the examples that set fairlock
// against locks that spin and retry: it starts the workers, has them take
// and give back the lock over and over, counts the grants, measures the
// waits, ends the run and prints the tables. What an example compares, the
// lock calls themselves, stays in the example: a worker gets them as an
// Acquire.
package contention

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Acquire takes a lock, a permit or a read lease for a worker and returns
// the function that gives it back. A caller that has to wait for its turn
// calls inLine once it has its place in line (pass it to fairlock.OnQueued);
// a spinner, which has no line, calls it as soon as it asks. A worker that
// never called it is in line once it is granted.
type Acquire func(ctx context.Context, inLine func()) (release func(context.Context) error, err error)

// Worker is one worker of a Run: it asks with Acquire, does Held and then
// holds the lock for Hold, gives it back, pauses for Pause, and asks again,
// until the run stops.
type Worker struct {
	Slot    int // whose grants and waits this worker's count as: its own, or its tenant's
	Acquire Acquire
	// Held, if not nil, is the work done under the lock. Its ctx is the
	// run's parent: stopping the run does not cut off work already begun.
	Held  func(ctx context.Context) error
	Hold  time.Duration
	Pause time.Duration
}

// Run is workers contending for a lock, and what they saw.
type Run struct {
	parent context.Context
	ctx    context.Context // the workers' asks: it ends when the run stops
	stop   context.CancelFunc
	wg     sync.WaitGroup

	// A Load's run counts at most limit grants, and only once all its
	// workers are in line; limit is 0 for a run of Start, where every grant
	// counts.
	limit, workers         int64
	inLine, total, holding atomic.Int64

	mu        sync.Mutex
	res       Result
	unserved  int // slots that have had no grant yet
	allServed chan struct{}
	errs      []error
}

// Start starts a run whose workers count their grants and waits in slots 0
// to slots-1; add workers with Go, and end the run with Finish. ctx bounds
// the run.
func Start(ctx context.Context, slots int) *Run {
	r := &Run{
		parent:    ctx,
		res:       Result{Slots: make([]Stats, slots)},
		unserved:  slots,
		allServed: make(chan struct{}),
	}
	r.ctx, r.stop = context.WithCancel(ctx)
	return r
}

// Go starts w.
func (r *Run) Go(w Worker) {
	joined := sync.OnceFunc(func() { r.inLine.Add(1) })
	r.wg.Go(func() {
		for r.ctx.Err() == nil && r.turn(w, joined) {
			if w.Pause > 0 {
				select {
				case <-r.ctx.Done():
					return
				case <-time.After(w.Pause):
				}
			}
		}
	})
}

// Finish waits until every slot has had a grant (so that even on a slow
// machine, where starting the workers can take long, every slot has a wait
// to show) or the run's context has ended. Then it stops the run and
// returns what the workers saw and the errors they met.
func (r *Run) Finish() (Result, error) {
	select {
	case <-r.allServed:
	case <-r.parent.Done():
	}
	return r.end()
}

// end stops the run, waits for its workers, and returns what they saw.
func (r *Run) end() (Result, error) {
	r.stop()
	r.wg.Wait()
	return r.res, errors.Join(r.errs...)
}

// turn is one turn of w: ask, hold, give back. It reports whether w is to
// ask again.
func (r *Run) turn(w Worker, joined func()) bool {
	asked := time.Now()
	release, err := w.Acquire(r.ctx, joined)
	waited := time.Since(asked)
	if err != nil {
		r.record(w.Slot, waited, false) // a wait cut off by the run's end counts as one
		// Once the run has stopped, an ask cut off is how it ends.
		if r.ctx.Err() == nil {
			r.fail(err)
		}
		return false
	}
	joined()
	counts, holds, last := r.grant()
	r.record(w.Slot, waited, counts)
	if holds {
		err = r.hold(w)
	}
	// The lock is given back even when the run has stopped meanwhile.
	if err := errors.Join(err, release(context.WithoutCancel(r.parent))); err != nil {
		r.fail(err)
		return false
	}
	if last {
		r.stop()
	}
	return !last
}

// grant says what a grant is: whether it counts, whether it is held (one
// past a Load's last is given back at once), and whether it is the last.
func (r *Run) grant() (counts, holds, last bool) {
	if r.limit == 0 {
		return true, true, false
	}
	// A worker that a busy machine started late was not starved by the
	// lock, so grants made before all are in line do not count: n is 0.
	var n int64
	if r.inLine.Load() == r.workers {
		n = r.total.Add(1)
	}
	return n > 0 && n <= r.limit, n <= r.limit, n >= r.limit
}

// record adds one wait to slot's Stats, and one grant if it counts.
func (r *Run) record(slot int, waited time.Duration, counts bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &r.res.Slots[slot]
	s.Worst = max(s.Worst, waited)
	if !counts {
		return
	}
	if s.Grants == 0 {
		if r.unserved--; r.unserved == 0 {
			close(r.allServed)
		}
	}
	s.Grants++
	s.Waited += waited
}

// hold does w's work under the lock and counts w among the holders while it
// does.
func (r *Run) hold(w Worker) error {
	now := r.holding.Add(1)
	defer r.holding.Add(-1)
	r.mu.Lock()
	r.res.Most = max(r.res.Most, now)
	r.mu.Unlock()
	var err error
	if w.Held != nil {
		err = w.Held(r.parent)
	}
	time.Sleep(w.Hold)
	return err
}

func (r *Run) fail(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}
