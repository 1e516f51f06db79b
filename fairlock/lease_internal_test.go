package fairlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fairlock/fairlock/internal/redistest"
)

// TestErrIsExactWhenTheTimerIsLate: a lease's Err says ErrLost once its
// session's local deadline passed, even though the timer that ends it has
// not run (a loaded machine runs timers late), and Done closes with it.
func TestErrIsExactWhenTheTimerIsLate(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, err := New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	lease, err := l.Acquire(context.Background(), "late-timer")
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Err(); err != nil {
		t.Fatalf("Err of a fresh lease: %v", err)
	}
	// The deadline passed, and its timer has not fired (the heartbeat, a
	// second away, cannot move it meanwhile).
	l.books.passDeadline(lease.session)
	if err := lease.Err(); !errors.Is(err, ErrLost) {
		t.Fatalf("Err past the session's deadline, its timer stopped: %v, want ErrLost", err)
	}
	select {
	case <-lease.Done():
	default:
		t.Fatal("Done still open after Err said ErrLost")
	}
}

// TestHeartbeatOnAnIdleLockLeavesNoKey: a heartbeat built while its waiter
// was queued can reach Redis after the waiter was granted and left. On the
// idle lock it finds, it must leave no key behind (the scan's schedule it
// writes included), for every kind.
func TestHeartbeatOnAnIdleLockLeavesNoKey(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	l, err := New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ctx := context.Background()
	for _, k := range kinds {
		c := &heartbeatCall{ref: l.refs.get(k, "idle"), waiters: []*waiter{{token: "gone:1"}}}
		if k.holderSet {
			c.capacity = 2
		}
		if err := l.runHeartbeats(ctx, &heartbeatPlan{calls: []*heartbeatCall{c}}); err != nil {
			t.Fatal(err)
		}
		if keys := rdb.Keys(ctx, "*idle*").Val(); len(keys) != 0 {
			t.Errorf("%s: a heartbeat on an idle lock left %q", k.lock, keys)
		}
	}
}

// passDeadline makes the local deadline of s's holders' key a moment ago,
// its timer stopped.
func (b *books) passDeadline(s *session) {
	b.mu.Lock()
	defer b.mu.Unlock()
	stopTimer(s.leaseTimer)
	s.leaseUntil = time.Now().Add(-time.Millisecond)
}
