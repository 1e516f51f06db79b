package fairlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// batchedCalls is how many calls ride the batch under test, behind a
// lone first call held in the network.
const batchedCalls = 7

// batchWorld is a Locker on a proxy, its client counting the round trips
// and the calls they carry, and a client of its own on the server.
type batchWorld struct {
	px    *redistest.Proxy
	l     *fairlock.Locker
	rdb   *redis.Client
	trips *tripCounter
}

func newBatchWorld(t *testing.T) *batchWorld {
	srv := redistest.Start(t)
	px := redistest.StartProxy(t, srv.Addr)
	c := redis.NewClient(&redis.Options{Addr: px.Addr})
	t.Cleanup(func() { c.Close() })
	trips := &tripCounter{}
	c.AddHook(trips)
	return &batchWorld{px: px, l: newLocker(t, c), rdb: srv.Client(t), trips: trips}
}

// batch holds a first Acquire (of "first") in the network, starts an
// Acquire of each name under its own context, waits until they all queue
// for the batch behind the held one, runs fault, and lets the first call
// go: they leave in one pipeline. It returns each call's result, and
// releases the first call's lease.
func (w *batchWorld) batch(t *testing.T, ctxs []context.Context, names []string, fault func()) []result {
	t.Helper()
	held := w.px.HoldRequest("{first}")
	first := make(chan result, 1)
	go func() {
		s, err := w.l.Acquire(withTimeout(t, 30*time.Second), "first")
		first <- result{s, err}
	}()
	<-held.Caught()
	out := make([]result, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			s, err := w.l.Acquire(ctxs[i], name)
			out[i] = result{s, err}
		})
	}
	for fairlock.Batched(w.l) < len(names) {
		time.Sleep(time.Millisecond)
	}
	fault()
	held.Release()
	wg.Wait()
	r := <-first
	if r.err != nil {
		t.Fatalf("the first call: %v", r.err)
	}
	released(t, r.lease)
	if got := w.trips.largest.Load(); got < int64(len(names)) {
		t.Fatalf("the most calls a round trip carried: %d, want the batch's %d", got, len(names))
	}
	return out
}

func namesOf(prefix string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return names
}

func contexts(t *testing.T, n int) []context.Context {
	ctxs := make([]context.Context, n)
	for i := range ctxs {
		ctxs[i] = withTimeout(t, 30*time.Second)
	}
	return ctxs
}

// holdsWhatItSays checks each call against Redis: a lease holds its lock,
// and a call that failed holds nothing, once withdrawals have run (two
// heartbeats).
func (w *batchWorld) holdsWhatItSays(t *testing.T, names []string, out []result) {
	t.Helper()
	time.Sleep(2*heartbeat + slack)
	for i, name := range names {
		holder := w.rdb.Get(context.Background(), "fairlock:{"+name+"}:lock").Val()
		r := out[i]
		switch {
		case r.err == nil && holder != r.lease.Token():
			t.Errorf("%s: the lease %s was granted, but Redis has %q", name, r.lease.Token(), holder)
		case r.err != nil && holder != "":
			t.Errorf("%s: the call failed (%v), but %q holds the lock", name, r.err, holder)
		}
		if r.err == nil {
			released(t, r.lease)
		}
	}
}

// The replies to a batch are lost (the connection closes once Redis has
// run it): each call finds out what became of its own request (recover.lua)
// and is granted, as it would be alone.
func TestBatchRepliesLost(t *testing.T) {
	t.Parallel()
	w := newBatchWorld(t)
	names := namesOf("lost", batchedCalls)
	out := w.batch(t, contexts(t, len(names)), names, func() { w.px.DropReplyTo("{lost-0}") })
	if w.px.DroppedAt().IsZero() {
		t.Fatal("no reply was lost: the test proves nothing")
	}
	for i, r := range out {
		if r.err != nil {
			t.Errorf("%s: %v, want a grant recovered", names[i], r.err)
		}
	}
	w.holdsWhatItSays(t, names, out)
}

// The connection is cut while the batch is held in the network, before
// Redis ran it: each call is told its request is withdrawn, and queues
// again, and is granted.
func TestBatchConnectionCut(t *testing.T) {
	t.Parallel()
	w := newBatchWorld(t)
	names := namesOf("cut", batchedCalls)
	out := w.batch(t, contexts(t, len(names)), names, func() {
		h := w.px.HoldRequest("{cut-0}")
		go func() {
			<-h.Caught()
			if w.px.Cut() == 0 {
				t.Error("no connection to cut")
			}
			h.Release()
		}()
	})
	for i, r := range out {
		if r.err != nil {
			t.Errorf("%s: %v, want a grant after the cut", names[i], r.err)
		}
	}
	w.holdsWhatItSays(t, names, out)
}

// One call of a batch gives up while the batch is held: it returns at
// once with its context's error and holds nothing, and the others are
// granted.
func TestBatchCallCancelled(t *testing.T) {
	t.Parallel()
	w := newBatchWorld(t)
	names := namesOf("cancel", batchedCalls)
	ctxs := contexts(t, len(names))
	short, cancel := context.WithCancel(ctxs[0])
	ctxs[0] = short
	out := w.batch(t, ctxs, names, cancel)
	if !errors.Is(out[0].err, context.Canceled) {
		t.Errorf("the cancelled call: %v, want context.Canceled", out[0].err)
	}
	for i, r := range out[1:] {
		if r.err != nil {
			t.Errorf("%s: %v, want a grant", names[i+1], r.err)
		}
	}
	w.holdsWhatItSays(t, names, out)
}

// One call of a batch is refused by Redis (a semaphore's capacity that
// does not match the one in use): it fails with ErrInvalid, alone.
func TestBatchCallRefused(t *testing.T) {
	t.Parallel()
	w := newBatchWorld(t)
	ctx := withTimeout(t, 30*time.Second)
	sem, err := w.l.Semaphore("refused-sem", 2)
	if err != nil {
		t.Fatal(err)
	}
	held, err := sem.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer released(t, held)
	wrong, err := w.l.Semaphore("refused-sem", 3)
	if err != nil {
		t.Fatal(err)
	}

	names := namesOf("refused", batchedCalls)
	hold := w.px.HoldRequest("{first}")
	first := make(chan error, 1)
	go func() {
		s, err := w.l.Acquire(ctx, "first")
		if err == nil {
			err = s.Release(ctx)
		}
		first <- err
	}()
	<-hold.Caught()
	out := make([]result, len(names))
	var refused error
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			s, err := w.l.Acquire(ctx, name)
			out[i] = result{s, err}
		})
	}
	wg.Go(func() {
		_, refused = wrong.Acquire(ctx, 1)
	})
	for fairlock.Batched(w.l) < len(names)+1 {
		time.Sleep(time.Millisecond)
	}
	hold.Release()
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if !errors.Is(refused, fairlock.ErrInvalid) {
		t.Errorf("the semaphore of the wrong capacity: %v, want ErrInvalid", refused)
	}
	for i, r := range out {
		if r.err != nil {
			t.Errorf("%s: %v, want a grant beside a refused call", names[i], r.err)
		}
	}
	w.holdsWhatItSays(t, names, out)
}
