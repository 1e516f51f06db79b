package contention

import (
	"context"
	"time"
)

// Load is the examples' head-to-head: Workers workers each take the lock,
// hold it for Hold, give it back and at once ask again, until the lock has
// been granted Grants times. Grants count once every worker is in line, so
// that a worker that a busy machine started late is not taken for one the
// lock starved.
type Load struct {
	Workers int
	Grants  int
	Hold    time.Duration
}

// Run runs the load, worker i asking with newAcquire(i), and returns what
// each worker saw.
func (l Load) Run(ctx context.Context, newAcquire func(worker int) Acquire) (Result, error) {
	r := Start(ctx, l.Workers)
	r.limit, r.workers = int64(l.Grants), int64(l.Workers)
	for i := range l.Workers {
		r.Go(Worker{Slot: i, Acquire: newAcquire(i), Hold: l.Hold})
	}
	// The worker that makes the last grant that counts stops the run; a
	// worker the lock starves may never have had one, so do not Finish.
	r.wg.Wait()
	return r.end()
}
