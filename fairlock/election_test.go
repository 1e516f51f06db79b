package fairlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Tests of Election: candidates lead in FIFO order, epochs strictly
// increase, a resignation hands over at once, a leader cut off knows it
// lost before the next one leads, and observers see every value in order.

func mustElection(t testing.TB, l *fairlock.Locker, name string) *fairlock.Election {
	t.Helper()
	e, err := l.Election(name)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// An observation is what one observer saw, in order.
type observation struct {
	mu   sync.Mutex
	seen []fairlock.Leader
}

// observeAll follows e until the test ends, and returns what it saw.
func observeAll(t testing.TB, e *fairlock.Election) *observation {
	ctx, cancel := context.WithCancel(context.Background())
	o := &observation{}
	ch := e.Observe(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ld := range ch {
			o.mu.Lock()
			o.seen = append(o.seen, ld)
			o.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return o
}

// awaitSeen waits until o has seen ld, within bound, and checks that what
// it saw so far is in strictly increasing order of epoch and revision.
func (o *observation) awaitSeen(t testing.TB, ld fairlock.Leader, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		o.mu.Lock()
		seen := append([]fairlock.Leader(nil), o.seen...)
		o.mu.Unlock()
		for i := 1; i < len(seen); i++ {
			a, b := seen[i-1], seen[i]
			if b.Epoch < a.Epoch || b.Epoch == a.Epoch && b.Revision <= a.Revision {
				t.Fatalf("an observer saw %+v after %+v", b, a)
			}
		}
		if len(seen) > 0 && seen[len(seen)-1] == ld {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("an observer did not see %+v within %v; it saw %+v", ld, bound, seen)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// campaignFor starts a Campaign with value in a goroutine and returns once
// the candidate is queued, so that the order of candidates is certain.
func campaignFor(t testing.TB, ctx context.Context, e *fairlock.Election, value string) <-chan termResult {
	t.Helper()
	out := make(chan termResult, 1)
	queued := make(chan struct{})
	go func() {
		var once sync.Once
		term, err := e.Campaign(ctx, value, fairlock.OnQueued(func(int) { once.Do(func() { close(queued) }) }))
		out <- termResult{term, err}
	}()
	select {
	case <-queued:
	case r := <-out:
		t.Fatalf("Campaign returned before queueing: %v", r.err)
	case <-time.After(5 * time.Second):
		t.Fatal("candidate never queued")
	}
	return out
}

type termResult struct {
	term *fairlock.Term
	err  error
}

func awaitTerm(t testing.TB, ch <-chan termResult, bound time.Duration) *fairlock.Term {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("Campaign: %v", r.err)
		}
		return r.term
	case <-time.After(bound):
		t.Fatalf("not elected within %v", bound)
	}
	return nil
}

// elect campaigns for e, which nobody leads, and returns the term.
func elect(t testing.TB, ctx context.Context, e *fairlock.Election, value string) *fairlock.Term {
	t.Helper()
	term, err := e.Campaign(ctx, value)
	if err != nil {
		t.Fatal(err)
	}
	return term
}

func mustLead(t testing.TB, e *fairlock.Election, want fairlock.Leader) {
	t.Helper()
	got, err := e.Leader(context.Background())
	if err != nil || got != want {
		t.Fatalf("Leader() = %+v, %v; want %+v", got, err, want)
	}
}

// Five candidates lead in the order they campaigned, each resignation
// hands over within a heartbeat (pub/sub makes it at once; a lost message
// costs the next heartbeat), and three observers see every value of every
// leader, in order.
func TestElectionFIFOAndObservers(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 30*time.Second)
	var observers []*observation
	for range 3 {
		observers = append(observers, observeAll(t, mustElection(t, newLocker(t, srv.Client(t)), "leader")))
	}
	var candidates []*fairlock.Election
	for range 5 {
		candidates = append(candidates, mustElection(t, newLocker(t, srv.Client(t)), "leader"))
	}
	if _, err := candidates[0].Leader(ctx); !errors.Is(err, fairlock.ErrNoLeader) {
		t.Fatalf("Leader() before any campaign: %v, want ErrNoLeader", err)
	}
	term := elect(t, ctx, candidates[0], "c0")
	var waiting []<-chan termResult
	for i := 1; i < 5; i++ {
		waiting = append(waiting, campaignFor(t, ctx, candidates[i], fmt.Sprintf("c%d", i)))
	}
	var last int64
	for i := range 5 {
		if term.Epoch() <= last {
			t.Fatalf("candidate %d's epoch %d is not above %d", i, term.Epoch(), last)
		}
		last = term.Epoch()
		first := fairlock.Leader{Value: fmt.Sprintf("c%d", i), Epoch: term.Epoch(), Revision: 1}
		mustLead(t, candidates[i], first)
		if err := term.Proclaim(ctx, first.Value+" again"); err != nil {
			t.Fatal(err)
		}
		second := fairlock.Leader{Value: first.Value + " again", Epoch: term.Epoch(), Revision: 2}
		mustLead(t, candidates[(i+1)%5], second)
		for _, o := range observers {
			o.awaitSeen(t, second, heartbeat+slack)
		}
		if err := term.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(term.Err(), fairlock.ErrReleased) {
			t.Fatalf("a resigned term's Err: %v", term.Err())
		}
		if err := term.Proclaim(ctx, "late"); !errors.Is(err, fairlock.ErrNotHeld) {
			t.Fatalf("Proclaim after Resign: %v, want ErrNotHeld", err)
		}
		if i < 4 {
			term = awaitTerm(t, waiting[i], heartbeat+slack)
		}
	}
	for _, o := range observers {
		if n := len(o.seen); n != 10 {
			t.Errorf("an observer saw %d values, want the 10 published: %+v", n, o.seen)
		}
	}
}

// A leader cut off from Redis learns it lost the leadership before the
// next candidate is elected, and the next one leads within the lease TTL
// and a heartbeat; its epoch is above the old one's, and the old leader's
// Proclaim changes nothing once it is back.
func TestElectionLeaderCutOff(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 30*time.Second)
	proxy := redistest.StartProxy(t, srv.Addr)
	viaProxy := redis.NewClient(&redis.Options{Addr: proxy.Addr, MaxRetries: -1})
	t.Cleanup(func() { viaProxy.Close() })
	cut := mustElection(t, newLocker(t, viaProxy), "cut")
	next := mustElection(t, newLocker(t, srv.Client(t)), "cut")
	watch := observeAll(t, mustElection(t, newLocker(t, srv.Client(t)), "cut"))
	old := elect(t, ctx, cut, "old")
	waiting := campaignFor(t, ctx, next, "new")
	proxy.Refuse(true)
	proxy.Cut()
	start := time.Now()
	term := awaitTerm(t, waiting, leaseTTL+heartbeat+slack)
	elected := time.Now()
	select {
	case <-old.Done():
	default:
		t.Fatalf("the old leader did not know it lost before the next was elected (%v after the cut)", elected.Sub(start))
	}
	if !errors.Is(old.Err(), fairlock.ErrLost) {
		t.Fatalf("the old term's Err: %v, want ErrLost", old.Err())
	}
	if term.Epoch() <= old.Epoch() {
		t.Fatalf("the new epoch %d is not above the old %d", term.Epoch(), old.Epoch())
	}
	now := fairlock.Leader{Value: "new", Epoch: term.Epoch(), Revision: 1}
	watch.awaitSeen(t, now, heartbeat+slack)
	proxy.Refuse(false)
	if err := old.Proclaim(ctx, "stale"); !errors.Is(err, fairlock.ErrNotHeld) {
		t.Fatalf("the old leader's Proclaim: %v, want ErrNotHeld", err)
	}
	mustLead(t, next, now)
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := next.Leader(ctx); !errors.Is(err, fairlock.ErrNoLeader) {
		t.Fatalf("Leader() after the last resignation: %v, want ErrNoLeader", err)
	}
	keysWithTTLs(t, ctx, srv.Client(t), "after the election")
}

// A cancelled campaign leaves the queue; bad input is refused at once.
func TestElectionInputAndCancel(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	l := newLocker(t, srv.Client(t))
	if _, err := l.Election(""); !errors.Is(err, fairlock.ErrInvalid) {
		t.Fatalf("Election(\"\"): %v, want ErrInvalid", err)
	}
	e := mustElection(t, l, "input")
	if _, err := e.Campaign(ctx, strings.Repeat("v", fairlock.MaxValueLen+1)); !errors.Is(err, fairlock.ErrInvalid) {
		t.Fatalf("Campaign with a huge value: %v, want ErrInvalid", err)
	}
	term := elect(t, ctx, e, "v")
	if err := term.Proclaim(ctx, strings.Repeat("v", fairlock.MaxValueLen+1)); !errors.Is(err, fairlock.ErrInvalid) {
		t.Fatalf("Proclaim with a huge value: %v, want ErrInvalid", err)
	}
	other := mustElection(t, newLocker(t, srv.Client(t)), "input")
	cctx, cancel := context.WithCancel(ctx)
	waiting := campaignFor(t, cctx, other, "w")
	cancel()
	if r := <-waiting; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("a cancelled Campaign: %v, want context.Canceled", r.err)
	}
	st, err := e.Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Queued != 0 || !st.Held() || st.Holders[0].Token != term.Lease().Token() {
		t.Fatalf("Inspect after a cancelled campaign: %+v", st)
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}
