// Package transfers is a workload for the tests of MultiMutex: transfers
// between accounts, each holding both accounts' mutexes, named in a random
// order, so that locks taken in the caller's order would deadlock.
package transfers

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
)

// Run has workers goroutines on each of lockers move 1 between two of
// accounts (mutexes prefix<i>), for d, each transfer within a 10 s ctx,
// pausing pause while it holds both. It fails t if a transfer fails (a
// deadlock waits out its ctx), if an account is in two transfers at once,
// or if the total moved; it returns the transfers done.
func Run(t testing.TB, lockers []*fairlock.Locker, prefix string, accounts, workers int, d, pause time.Duration) int64 {
	t.Helper()
	balance := make([]atomic.Int64, accounts)
	busy := make([]atomic.Bool, accounts)
	var done atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for _, l := range lockers {
		for range workers {
			wg.Go(func() {
				for time.Now().Before(deadline) {
					from, to := rand.IntN(accounts), rand.IntN(accounts-1)
					if to >= from {
						to++
					}
					m, err := l.MultiMutex(fmt.Sprint(prefix, from), fmt.Sprint(prefix, to))
					if err != nil {
						t.Error(err)
						return
					}
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					err = m.Do(ctx, func(context.Context) error {
						for _, a := range []int{from, to} {
							if busy[a].Swap(true) {
								return fmt.Errorf("account %d is in two transfers at once", a)
							}
						}
						// A read, a pause and a write: only the locks keep
						// the total whole.
						f, g := balance[from].Load(), balance[to].Load()
						time.Sleep(pause)
						balance[from].Store(f - 1)
						balance[to].Store(g + 1)
						busy[from].Store(false)
						busy[to].Store(false)
						return nil
					})
					cancel()
					if err != nil {
						t.Errorf("transfer %d -> %d: %v", from, to, err)
						return
					}
					done.Add(1)
				}
			})
		}
	}
	wg.Wait()
	var total int64
	for i := range balance {
		total += balance[i].Load()
	}
	if total != 0 {
		t.Errorf("the total moved from 0 to %d", total)
	}
	if done.Load() == 0 {
		t.Error("no transfer finished")
	}
	return done.Load()
}
