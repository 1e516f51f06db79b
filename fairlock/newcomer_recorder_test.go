package fairlock_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/fairlock/fairlocktest"
)

// fairlocktest serves the kind newcomer_test.go defines (a pair: two
// permits, one a request) with no change of its own: its Server runs it,
// and its Recorder checks its events as a lock apart from the mutex of the
// same name, in the order of fairlock.Kinds.
func TestRecorderServesANewKind(t *testing.T) {
	t.Parallel()
	rec := fairlocktest.NewRecorder()
	l := fairlocktest.New(t, rec.Option())
	ctx := withTimeout(t, 20*time.Second)
	p, err := l.Pair("two")
	if err != nil {
		t.Fatal(err)
	}
	var held []*fairlock.Lease
	for range 2 {
		lease, err := p.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, lease)
	}
	waits := []<-chan result{queueFor(t, ctx, p.Acquire), queueFor(t, ctx, p.Acquire)}
	mu := mustAcquire(t, l, "two")
	for i, w := range waits {
		if err := rec.Release(ctx, held[i]); err != nil {
			t.Fatal(err)
		}
		lease, _ := await(t, w, 5*time.Second)
		held = append(held, lease)
	}
	for _, lease := range append(held[2:], mu) {
		if err := rec.Release(ctx, lease); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{mu.Token()} // the mutex comes first in fairlock.Kinds
	for _, lease := range held {
		want = append(want, lease.Token())
	}
	if err := errors.Join(rec.CheckFIFO("two"), rec.CheckFences("two"), rec.CheckGrantOrder("two", want...)); err != nil {
		t.Error(err)
	}
	if got := rec.Events(); !slices.ContainsFunc(got, func(e fairlock.Event) bool { return e.Lock == fairlock.LockPair }) {
		t.Errorf("no event of the pair in %v", got)
	}
	// Its events are checked, not passed over: a grant out of queue order
	// is found.
	bad := fairlocktest.NewRecorder()
	for _, e := range []fairlock.Event{
		{Kind: fairlock.EventEnqueued, Name: "x", Lock: fairlock.LockPair, Token: "a"},
		{Kind: fairlock.EventEnqueued, Name: "x", Lock: fairlock.LockPair, Token: "b"},
		{Kind: fairlock.EventGranted, Name: "x", Lock: fairlock.LockPair, Token: "b", Fence: 1},
		{Kind: fairlock.EventGranted, Name: "x", Lock: fairlock.LockPair, Token: "a", Fence: 2},
	} {
		bad.Record(e)
	}
	if err := bad.CheckFIFO("x"); err == nil || errors.Is(err, fairlock.ErrInvalid) {
		t.Errorf("CheckFIFO of a pair granted out of order: %v", err)
	}
}
