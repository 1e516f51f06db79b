package fairlock_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fairlock/fairlock/internal/redistest"
)

// transferRun is how long TestMultiMutexTransfers runs: 5 s in the test
// command and CI, longer by hand (-transfer-run=30s).
var transferRun = flag.Duration("transfer-run", 5*time.Second, "how long TestMultiMutexTransfers moves money")

// TestMultiMutexTransfers: 8 processes move money among 10 accounts, each
// transfer holding both accounts through a MultiMutex, in random
// directions, while holders are killed (SIGKILL, and a new process takes
// over) and paused (SIGSTOP past the lease TTL). No transfer waits out its
// 10 s ctx (no deadlock: the run is shorter than that), the store, which
// checks both accounts' fences and moves the money in one step, conserves
// the total, a paused holder's late transfer is refused by a fence, and in
// each account's queue the history checker finds one holder at a time,
// fences in grant order, and FIFO.
func TestMultiMutexTransfers(t *testing.T) {
	t.Parallel()
	redistest.SkipUnderRace(t)
	const lease, waiterTTL = 400 * time.Millisecond, 300 * time.Millisecond
	const accounts, procs, opening = 10, 8, 100
	run := *transferRun
	e := newEnv(t, lease, waiterTTL)
	ctx := context.Background()
	for i := range accounts {
		e.rdb.HSet(ctx, accountKey(i), "balance", opening, "fence", 0)
		e.rdb.PExpire(ctx, accountKey(i), 10*time.Minute)
	}
	// The run starts once the processes are up: under -race, on a busy
	// machine, starting them takes seconds.
	ps := e.spawn(procs, reportParts())
	end := time.Now().Add(run)
	start := func(p *Proc) string {
		w := p.NewW()
		p.Send("transfer %s %d %d", w, accounts, time.Until(end).Milliseconds())
		return w
	}
	live := map[*Proc]string{}
	for _, p := range ps {
		live[p] = start(p)
	}
	kills, pauses := 0, 0
	for time.Until(end) > 2*lease {
		time.Sleep(time.Duration(300+rand.IntN(400)) * time.Millisecond)
		var victim *Proc
		for p := range live {
			victim = p
			break
		}
		if rand.IntN(2) == 0 {
			victim.Signal(syscall.SIGKILL)
			delete(live, victim)
			kills++
			p := e.c.Spawn(reportParts())
			live[p] = start(p)
		} else {
			victim.Signal(syscall.SIGSTOP)
			time.Sleep(lease + e.hb)
			victim.Signal(syscall.SIGCONT)
			pauses++
		}
	}
	var done int64
	for p, w := range live {
		ev := e.c.H.MustWait(t, time.Until(end)+15*time.Second, p.ID+" done", isKind(w, "xferdone"))
		done += ev.N
	}
	var sum int64
	for i := range accounts {
		n, err := e.rdb.HGet(ctx, accountKey(i), "balance").Int64()
		if err != nil {
			t.Fatal(err)
		}
		sum += n
	}
	if sum != accounts*opening {
		t.Errorf("the total is %d, not %d", sum, accounts*opening)
	}
	outcomes := map[string]int{}
	for _, ev := range e.c.H.Events() {
		if ev.Kind == "xfer" {
			outcomes[ev.Err]++
			if ev.Err != "ok" && ev.Err != "rejected" && !strings.HasPrefix(ev.Err, "lost") && ev.Err != "notheld" {
				t.Errorf("transfer %s by %s: %s", ev.L, ev.Proc, ev.Err)
			}
		}
	}
	if outcomes["ok"] == 0 {
		t.Error("no transfer went through")
	}
	// Each transfer's mutexes are waiters of their own in the history: one
	// holder at a time, fences in grant order and FIFO, in each queue.
	checked := e.check(CheckOpts{})
	report(t, "multi-lock transfers, kills and pauses", fmt.Sprintf("%d processes, %d accounts, %v: no deadlock, total conserved, each account's queue checked", procs, accounts, run),
		fmt.Sprintf("transfers %v (done by the processes alive at the end: %d); kills %d, pauses %d; total %d; checker: %s", outcomes, done, kills, pauses, sum, checked.Summary()))
	for i := range accounts {
		e.settle(fmt.Sprint("acct:", i))
	}
}
