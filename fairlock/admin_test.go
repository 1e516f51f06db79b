package fairlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestQueueListsLiveWaitersInOrder(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 20*time.Second)
	l := newLocker(t, srv.Client(t))
	if q, err := l.Queue(ctx, "q"); err != nil || q.Held || len(q.Queue) != 0 || q.Waiters != 0 {
		t.Fatalf("Queue of an unused lock: %+v, %v", q, err)
	}
	held := mustAcquire(t, l, "q")
	first := queueBehind(t, ctx, newLocker(t, srv.Client(t)), "q")
	expired(t, rdb, "q")
	second := queueBehind(t, ctx, newLocker(t, srv.Client(t)), "q")

	q, err := l.Queue(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if !q.Held || q.Holder != held.Token() || q.Fence < held.Fence() || q.TTL <= 0 || q.TTL > leaseTTL {
		t.Fatalf("holder part of %+v; lease %s fence %d", q, held.Token(), held.Fence())
	}
	if q.Waiters != 2 || len(q.Queue) != 2 {
		t.Fatalf("want 2 live waiters (the dead entry skipped), got %+v", q)
	}
	for i, w := range q.Queue {
		if w.Position != i+1 || w.Deadline <= 0 || w.Deadline > waiterTTL {
			t.Errorf("waiter %d: %+v", i, w)
		}
	}
	held.Release(ctx)
	a, _ := await(t, first, slack)
	if a.Token() != q.Queue[0].Token {
		t.Errorf("first granted %s, Queue listed %s first", a.Token(), q.Queue[0].Token)
	}
	a.Release(ctx)
	b, _ := await(t, second, slack)
	if b.Token() != q.Queue[1].Token {
		t.Errorf("second granted %s, Queue listed %s second", b.Token(), q.Queue[1].Token)
	}
	b.Release(ctx)
}

// expired puts an entry in name's queue whose deadline has passed: a waiter
// that died and that nobody has reaped yet.
func expired(t testing.TB, rdb *redis.Client, name string) {
	t.Helper()
	ctx := context.Background()
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	rdb.RPush(ctx, "fairlock:{"+name+"}:queue", "gone-locker:1")
	rdb.ZAdd(ctx, "fairlock:{"+name+"}:alive", redis.Z{Score: float64(now.Add(-time.Second).UnixMilli()), Member: "gone-locker:1"})
}

func TestQueueIsBounded(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 20*time.Second)
	l := newLocker(t, srv.Client(t), fairlock.WithWaiterTTL(time.Minute), fairlock.WithLeaseTTL(time.Minute))
	held := mustAcquire(t, l, "big")
	defer held.Release(ctx)
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	const n = fairlock.MaxQueueListed + 500
	p := rdb.Pipeline()
	for i := range n {
		token := fmt.Sprintf("many:%d", i)
		p.RPush(ctx, "fairlock:{big}:queue", token)
		p.ZAdd(ctx, "fairlock:{big}:alive", redis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: token})
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	q, err := l.Queue(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if q.Waiters != n || len(q.Queue) != fairlock.MaxQueueListed {
		t.Fatalf("Waiters %d, listed %d; want %d and %d", q.Waiters, len(q.Queue), n, fairlock.MaxQueueListed)
	}
	if last := q.Queue[len(q.Queue)-1]; last.Position != fairlock.MaxQueueListed || last.Token != fmt.Sprintf("many:%d", fairlock.MaxQueueListed-1) {
		t.Fatalf("last listed waiter %+v", last)
	}
}

// A forced release hands the lock on as a release would; the old holder
// learns at its next heartbeat: ErrLost on its lease, ErrNotHeld after.
func TestForceRelease(t *testing.T) {
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	old, next, admin := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	if _, err := admin.ForceRelease(ctx, "stuck", ""); !errors.Is(err, fairlock.ErrNotHeld) {
		t.Fatalf("ForceRelease of a free lock: %v, want ErrNotHeld", err)
	}
	held := mustAcquire(t, old, "stuck")
	w := queueBehind(t, ctx, next, "stuck")
	if _, err := admin.ForceRelease(ctx, "stuck", "someone-else:1"); !errors.Is(err, fairlock.ErrNotHeld) {
		t.Fatalf("ForceRelease of another token: %v, want ErrNotHeld", err)
	}
	if st, _ := admin.Inspect(ctx, "stuck"); st.Holder != held.Token() {
		t.Fatalf("ForceRelease of another token changed the holder: %+v", st)
	}

	res, err := admin.ForceRelease(ctx, "stuck", held.Token())
	if err != nil {
		t.Fatal(err)
	}
	s, _ := await(t, w, slack)
	if res.Ended != held.Token() || res.Holder != s.Token() || res.Fence != s.Fence() || res.Fence <= held.Fence() {
		t.Fatalf("result %+v; old %s (fence %d), new %s (fence %d)", res, held.Token(), held.Fence(), s.Token(), s.Fence())
	}
	mustBeLost(t, ctx, admin, held, s)
	if err := s.Release(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = admin.ForceRelease(ctx, "stuck", "")
	if !errors.Is(err, fairlock.ErrNotHeld) || res != (fairlock.ForceReleaseResult{}) {
		t.Fatalf("ForceRelease after the last release: %+v, %v", res, err)
	}
}

func TestForceReleaseWithNobodyWaiting(t *testing.T) {
	srv := redistest.Start(t)
	ctx := withTimeout(t, 10*time.Second)
	l := newLocker(t, srv.Client(t))
	held := mustAcquire(t, l, "alone")
	res, err := l.ForceRelease(ctx, "alone", "")
	if err != nil || res.Ended != held.Token() || res.Holder != "" || res.Fence != 0 {
		t.Fatalf("ForceRelease: %+v, %v", res, err)
	}
	if s, err := l.TryAcquire(ctx, "alone"); err != nil || s.Fence() <= held.Fence() {
		t.Fatalf("TryAcquire after a forced release: %v", err)
	} else {
		s.Release(ctx)
	}
}

func TestNames(t *testing.T) {
	srv := redistest.Start(t)
	ctx := withTimeout(t, 10*time.Second)
	l := newLocker(t, srv.Client(t))
	other := newLocker(t, srv.Client(t), fairlock.WithKeyPrefix("fairlock:other"))
	odd := []string{"a{b}c", "100%", "%7B", "star*[?]\\", "plain"}
	for _, name := range odd {
		mustAcquire(t, l, name)
	}
	queued := newLocker(t, srv.Client(t))
	queueBehind(t, ctx, queued, "plain")
	mustAcquire(t, other, "hidden")
	mustAcquire(t, l, "freed").Release(ctx)
	got, err := l.Names(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(odd)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("Names = %q, want %q", got, want)
	}
	if got, err := other.Names(ctx); err != nil || !slices.Equal(got, []string{"hidden"}) {
		t.Fatalf("Names under another prefix = %q, %v", got, err)
	}
	// A prefix is matched literally, glob characters and all.
	glob := newLocker(t, srv.Client(t), fairlock.WithKeyPrefix("p*[?]"))
	mustAcquire(t, newLocker(t, srv.Client(t), fairlock.WithKeyPrefix("pX[?]")), "not-mine")
	mustAcquire(t, glob, "mine")
	if got, err := glob.Names(ctx); err != nil || !slices.Equal(got, []string{"mine"}) {
		t.Fatalf("Names under a prefix with glob characters = %q, %v", got, err)
	}
}
