package fairlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/fairlock/fairlocktest"
	"github.com/fairlock/fairlock/internal/redistest"
)

// balance checks what a metrics adapter relies on: every waiter that was
// reported queued is reported leaving the queue exactly once, and an event
// without Queued never takes one away.
func balance(t *testing.T, rec *fairlocktest.Recorder, name string) {
	t.Helper()
	queued := map[string]int{}
	for _, e := range rec.Filter(name, fairlock.EventEnqueued) {
		queued[e.Token]++
	}
	for _, kind := range []fairlock.EventKind{fairlock.EventGranted, fairlock.EventCancelled} {
		for _, e := range rec.Filter(name, kind) {
			if e.Queued {
				queued[e.Token]--
			} else if queued[e.Token] != 0 {
				t.Errorf("%v of queued token %s has Queued false", kind, e.Token)
			}
		}
	}
	for token, n := range queued {
		if n != 0 {
			t.Errorf("token %s: enqueued minus left the queue = %d, want 0", token, n)
		}
	}
}

func waitEvents(t *testing.T, rec *fairlocktest.Recorder, name string, kind fairlock.EventKind, n int) []fairlock.Event {
	t.Helper()
	if err := rec.Wait(withTimeout(t, 5*time.Second), name, kind, n); err != nil {
		t.Fatal(err)
	}
	return rec.Filter(name, kind)
}

func TestEventsReportWaitAndHold(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rec := fairlocktest.NewRecorder()
	a, b := newLocker(t, srv.Client(t), rec.Option()), newLocker(t, srv.Client(t), rec.Option())
	ctx := withTimeout(t, 10*time.Second)

	first := mustAcquire(t, a, "ev")
	next := queueBehind(t, ctx, b, "ev")
	const hold = 50 * time.Millisecond
	time.Sleep(hold)
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second, _ := await(t, next, handoff)
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}

	grants := waitEvents(t, rec, "ev", fairlock.EventGranted, 2)
	if g := grants[0]; g.Token != first.Token() || g.Queued || g.Wait <= 0 || g.Fence != first.Fence() {
		t.Errorf("uncontended grant: %+v, want Queued false, a Wait and the lease's fence", g)
	}
	if g := grants[1]; g.Token != second.Token() || !g.Queued || g.Wait < hold {
		t.Errorf("queued grant: %+v, want Queued true and Wait >= %v", g, hold)
	}
	released := waitEvents(t, rec, "ev", fairlock.EventReleased, 2)
	if r := released[0]; r.Token != first.Token() || r.Held < hold || r.Held > hold+slack || r.Fence != first.Fence() {
		t.Errorf("release: %+v, want Held about %v", r, hold)
	}
	if r := released[1]; r.Held <= 0 || r.Held > slack {
		t.Errorf("quick release: Held %v", r.Held)
	}
	balance(t, rec, "ev")
}

func TestCancelledEventSaysWhyAndHowLong(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rec := fairlocktest.NewRecorder()
	a := newLocker(t, srv.Client(t), rec.Option())
	b, err := fairlock.New(srv.Client(t), fairlock.WithLeaseTTL(leaseTTL), fairlock.WithWaiterTTL(waiterTTL), rec.Option())
	if err != nil {
		t.Fatal(err)
	}
	ctx := withTimeout(t, 10*time.Second)
	held := mustAcquire(t, a, "why")

	cctx, cancel := context.WithCancel(ctx)
	cancelled := queueBehind(t, cctx, b, "why")
	time.Sleep(20 * time.Millisecond)
	cancel()
	if r := <-cancelled; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled Acquire: %v", r.err)
	}

	tctx, stop := context.WithTimeout(ctx, 100*time.Millisecond)
	defer stop()
	if _, err := b.Acquire(tctx, "why"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timed-out Acquire: %v", err)
	}

	closing := queueBehind(t, ctx, b, "why")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if r := <-closing; !errors.Is(r.err, fairlock.ErrClosed) {
		t.Fatalf("Acquire on a closed Locker: %v", r.err)
	}

	got := waitEvents(t, rec, "why", fairlock.EventCancelled, 3)
	want := []struct {
		err     error
		minWait time.Duration
	}{{context.Canceled, 20 * time.Millisecond}, {context.DeadlineExceeded, 100 * time.Millisecond}, {fairlock.ErrClosed, 0}}
	if len(got) != len(want) {
		t.Fatalf("%d cancelled events, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		e := got[i]
		if !errors.Is(e.Err, w.err) || !e.Queued || e.Wait < w.minWait || e.Wait <= 0 || e.Wait > w.minWait+slack {
			t.Errorf("cancelled event %d: %+v, want Err %v, Queued, Wait >= %v", i, e, w.err, w.minWait)
		}
		if errors.Is(e.Err, fairlock.ErrPlaceLost) {
			t.Errorf("cancelled event %d matches ErrPlaceLost: %v", i, e.Err)
		}
	}
	released(t, held)
	balance(t, rec, "why")
}

func TestLostEventReportsHeld(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	rec := fairlocktest.NewRecorder()
	l := newLocker(t, srv.Client(t), rec.Option())
	s := mustAcquire(t, l, "gone")
	rdb.Set(context.Background(), "fairlock:{gone}:lock", "someone-else", time.Minute)
	select {
	case <-s.Done():
	case <-time.After(heartbeat + slack):
		t.Fatal("lease not lost")
	}
	lost := waitEvents(t, rec, "gone", fairlock.EventLost, 1)
	if e := lost[0]; e.Token != s.Token() || e.Fence != s.Fence() || !errors.Is(e.Err, fairlock.ErrLost) || e.Held <= 0 || e.Held > heartbeat+slack {
		t.Errorf("lost event: %+v", e)
	}
	if n := len(rec.Filter("gone", fairlock.EventReleased)); n != 0 {
		t.Errorf("%d released events for a lost lease", n)
	}
}

// A waiter whose entry Redis forgot queues again: the first place ends with
// an EventCancelled that matches ErrPlaceLost, which is not the Acquire's
// outcome, and the same Acquire is granted later.
func TestPlaceLostIsNotAnOutcome(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	rec := fairlocktest.NewRecorder()
	a, b := newLocker(t, srv.Client(t), rec.Option()), newLocker(t, srv.Client(t), rec.Option())
	ctx := withTimeout(t, 10*time.Second)
	held := mustAcquire(t, a, "requeue")
	w := queueBehind(t, ctx, b, "requeue")
	token := rec.Enqueued("requeue")[0]
	rdb.LRem(ctx, "fairlock:{requeue}:queue", 0, token)
	rdb.ZRem(ctx, "fairlock:{requeue}:order", token)
	waitEvents(t, rec, "requeue", fairlock.EventEnqueued, 2)
	released(t, held)
	s, _ := await(t, w, handoff)
	released(t, s)

	cancelled := rec.Filter("requeue", fairlock.EventCancelled)
	if len(cancelled) != 1 || cancelled[0].Token != token || !cancelled[0].Queued || !errors.Is(cancelled[0].Err, fairlock.ErrPlaceLost) {
		t.Fatalf("cancelled events %+v, want one for %s matching ErrPlaceLost", cancelled, token)
	}
	if g := rec.Filter("requeue", fairlock.EventGranted); len(g) != 2 || g[1].Token != s.Token() || !g[1].Queued {
		t.Fatalf("grants %+v", g)
	}
	balance(t, rec, "requeue")
}

// A grant that Acquire gives up before returning it ends as EventCancelled,
// and its lease, never handed out, reports no end of its own.
func TestGivenUpGrantIsCancelledNotReleased(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rec := fairlocktest.NewRecorder()
	l := newLocker(t, srv.Client(t), rec.Option(), fairlock.WithReplicaAck(1, 20*time.Millisecond))
	if _, err := l.Acquire(withTimeout(t, 5*time.Second), "unacked"); !errors.Is(err, fairlock.ErrNotReplicated) {
		t.Fatalf("Acquire with no replica: %v", err)
	}
	cancelled := waitEvents(t, rec, "unacked", fairlock.EventCancelled, 1)
	if e := cancelled[0]; !errors.Is(e.Err, fairlock.ErrNotReplicated) || e.Queued || e.Wait < 20*time.Millisecond {
		t.Errorf("cancelled event %+v, want ErrNotReplicated, not queued, Wait >= 20ms", e)
	}
	for _, kind := range []fairlock.EventKind{fairlock.EventGranted, fairlock.EventReleased, fairlock.EventLost} {
		if n := len(rec.Filter("unacked", kind)); n != 0 {
			t.Errorf("%d %v events for a grant never handed out", n, kind)
		}
	}
}
