package fairlock

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/fairlock/fairlock/scripts"
)

// manyWaiters queues n waiters of a Locker that never hears a grant
// message and whose heartbeats the test runs itself (its own come every
// 20 s), behind a lease of another Locker, on name. It returns the
// Locker, the lease and where each waiter's Acquire reports. The Locker
// runs as the user of docs/operations.md's ACL rule, which must allow
// what its heartbeat sends.
func manyWaiters(t *testing.T, srv *redistest.Server, name string, n int) (*Locker, *Lease, chan *Lease) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	holders, err := New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holders.Close() })
	held, err := holders.Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	srv.SetUser(t, redistest.DocACLRule(t, "../docs/operations.md", "fairlock-app"))
	l, err := New(srv.ClientAs(t, "fairlock-app", "app-secret"), WithLeaseTTL(time.Minute), WithWaiterTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	// Set before the listener starts (at the first subscription), so only
	// heartbeats find the grants.
	l.notifier.onGrants = func(string) {}
	granted := make(chan *Lease, n)
	for range n {
		go func() {
			if s, err := l.Acquire(ctx, name); err == nil {
				granted <- s
			}
		}()
	}
	rdb := srv.Client(t)
	for rdb.ZCard(ctx, "fairlock:{"+name+"}:order").Val() < int64(n) {
		if ctx.Err() != nil {
			t.Fatal("the waiters did not all queue")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return l, held, granted
}

// A Locker with more waiters on a lock than one heartbeat asks about
// still finds each grant at the next heartbeat, with no message: the
// grant's mark in its session tells it.
func TestHeartbeatFindsGrantsAmongManyWaiters(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const n = 4 * scripts.Batch
	l, held, granted := manyWaiters(t, srv, "many", n)
	ctx := context.Background()
	for i := range 8 {
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		l.beat()
		select {
		case held = <-granted:
		case <-time.After(5 * time.Second): // the Locker's own heartbeat is 20 s away
			t.Fatalf("grant %d: not found by the heartbeat after it", i)
		}
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A waiter of many that lost its place, whichever heartbeats ask about
// it, learns so within 2 × n / Batch heartbeats, and queues again.
func TestHeartbeatFindsLostPlacesAmongManyWaiters(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	const n = 3 * scripts.Batch // every fourth heartbeat asks about each
	l, _, _ := manyWaiters(t, srv, "lost", n)
	ctx := context.Background()
	var lost []string
	for token, w := range l.books.waitersNow() {
		if len(lost) < 4 && w.seq%4 == uint64(len(lost)) {
			lost = append(lost, token)
		}
	}
	for _, token := range lost {
		rdb.ZRem(ctx, "fairlock:{lost}:order", token)
		rdb.LRem(ctx, "fairlock:{lost}:queue", 0, token)
	}
	for range 2 * n / scripts.Batch {
		l.beat()
	}
	deadline := time.Now().Add(5 * time.Second) // each queues again with a call of its own
	for {
		left := 0
		waiters := l.books.waitersNow()
		for _, token := range lost {
			if waiters[token] != nil {
				left++
			}
		}
		queued := rdb.ZCard(ctx, "fairlock:{lost}:order").Val()
		if left == 0 && queued == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d waiters that lost their place still think they wait; %d of %d queued", left, len(lost), queued, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A Locker with an observer sends through the heartbeat's script only the
// waiters that follow their place (OnPosition) and the newest of each
// line, as one without does: an observer hears of moves only for those.
func TestObserverLeavesWaitersOutOfTheScript(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	holders, err := New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	defer holders.Close()
	held, err := holders.Acquire(ctx, "observed")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	l, err := New(srv.Client(t), WithObserver(func(Event) {}), WithLeaseTTL(time.Minute), WithWaiterTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	queue := func(o ...AcquireOption) {
		queued := make(chan struct{})
		go l.Acquire(ctx, "observed", append(o, OnQueued(func(int) { close(queued) }))...)
		select {
		case <-queued:
		case <-ctx.Done():
			t.Fatal("a waiter did not queue")
		}
	}
	follows := func(int) {}
	queue(OnPosition(follows)) // the oldest, following its place
	for range 3 {
		queue()
	}
	var newest uint64
	for _, w := range l.books.waitersNow() {
		newest = max(newest, w.seq)
	}
	p := l.books.heartbeatPlan(l.sharded)
	var scripted, checked int
	for _, c := range p.calls {
		for _, w := range c.waiters {
			scripted++
			if w.onPosition == nil && w.seq != newest {
				t.Errorf("waiter %s, which follows no place and is not the newest, went through the script", w.token)
			}
		}
	}
	for _, q := range p.queued {
		checked += len(q.waiters)
	}
	if scripted != 2 || checked != 2 {
		t.Errorf("the script carried %d waiters and ZMSCORE %d; want 2 and 2", scripted, checked)
	}
}

// waitersNow is a copy of the books' waiters, by token.
func (b *books) waitersNow() map[string]*waiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.waiters)
}
