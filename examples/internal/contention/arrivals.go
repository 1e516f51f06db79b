package contention

import (
	"errors"
	"sync"
)

// Arrivals starts jobs one after another, each in a goroutine of its own,
// and the next only once the one before has reached the lock (queued, or
// been granted at once), which makes the order in which they reach it
// certain, so that an example can check that they were served in that order.
// The zero value is ready to use.
type Arrivals struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

// Arrive starts job and returns once it has reached the lock: once it calls
// reached, which it passes to fairlock.OnQueued and calls again after
// Acquire returns (for a grant made at once), or once it returns. Arrive
// returns the position job was first given: a waiter evicted for silence
// queues again, but it arrived once.
func (a *Arrivals) Arrive(job func(reached func(position int)) error) (position int) {
	in := make(chan struct{})
	var once sync.Once
	reached := func(pos int) {
		once.Do(func() {
			position = pos
			close(in)
		})
	}
	a.wg.Go(func() {
		err := job(reached)
		reached(0) // in case job failed before it reached the lock
		a.mu.Lock()
		a.errs = append(a.errs, err)
		a.mu.Unlock()
	})
	<-in
	return position
}

// Wait waits for every job to return, and returns their errors.
func (a *Arrivals) Wait() error {
	a.wg.Wait()
	return errors.Join(a.errs...)
}
