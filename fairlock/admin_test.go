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

func TestInspectListsLiveWaitersInOrder(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 20*time.Second)
	l := newLocker(t, srv.Client(t))
	if st, err := l.Inspect(ctx, fairlock.LockMutex, "q"); err != nil || st.Held() || len(st.Waiters) != 0 || st.Queued != 0 || st.Capacity != 1 {
		t.Fatalf("Inspect of an unused lock: %+v, %v", st, err)
	}
	held := mustAcquire(t, l, "q", fairlock.WithMetadata("holder meta"))
	queued := time.Now()
	first := queueBehind(t, ctx, newLocker(t, srv.Client(t)), "q", fairlock.WithMetadata("first"))
	goneWaiter(t, rdb, "", "q")
	second := queueBehind(t, ctx, newLocker(t, srv.Client(t)), "q")

	st, err := l.Inspect(ctx, fairlock.LockMutex, "q")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != 1 {
		t.Fatalf("holders of %+v", st)
	}
	h := st.Holders[0]
	if h.Token != held.Token() || h.Fence < held.Fence() || st.Fence < held.Fence() || h.TTL <= 0 || h.TTL > leaseTTL ||
		h.Metadata != "holder meta" || h.Shared || h.Permits != 1 || st.InUse != 1 {
		t.Fatalf("holder %+v of %+v; lease %s fence %d", h, st, held.Token(), held.Fence())
	}
	if st.Queued != 3 || len(st.Waiters) != 2 {
		t.Fatalf("want 2 live waiters listed (the dead entry skipped) of 3 queued, got %+v", st)
	}
	// Waited is by the server's clock, this machine's too.
	for i, w := range st.Waiters {
		if w.Position != i+1 || w.TTL <= 0 || w.TTL > waiterTTL || w.Waited < 0 || w.Waited > time.Since(queued)+time.Millisecond {
			t.Errorf("waiter %d: %+v", i, w)
		}
	}
	if st.Waiters[0].Waited < st.Waiters[1].Waited {
		t.Errorf("the first waiter waited %v, less than the second's %v", st.Waiters[0].Waited, st.Waiters[1].Waited)
	}
	if st.Waiters[0].Metadata != "first" || st.Waiters[1].Metadata != "" {
		t.Errorf("waiters' metadata: %+v", st.Waiters)
	}
	released(t, held)
	a, _ := await(t, first, handoff)
	if a.Token() != st.Waiters[0].Token {
		t.Errorf("first granted %s, Inspect listed %s first", a.Token(), st.Waiters[0].Token)
	}
	released(t, a)
	b, _ := await(t, second, handoff)
	if b.Token() != st.Waiters[1].Token {
		t.Errorf("second granted %s, Inspect listed %s second", b.Token(), st.Waiters[1].Token)
	}
	released(t, b)
}

// goneWaiter puts a waiter in the queue of the lock of key space space
// ("", "sem:" or "rw:") called name whose Locker died: its session's keys
// do not exist, and nobody has found that yet.
func goneWaiter(t testing.TB, rdb *redis.Client, space, name string) string {
	t.Helper()
	ctx := context.Background()
	base := "fairlock:{" + name + "}:" + space
	last, err := rdb.ZRangeWithScores(ctx, base+"order", -1, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	seq := 1.0
	if len(last) > 0 {
		seq = last[0].Score + 1
	}
	token := fmt.Sprintf("gone-%d.1:1", int(seq))
	rdb.RPush(ctx, base+"queue", token)
	rdb.ZAdd(ctx, base+"order", redis.Z{Score: seq, Member: token})
	return token
}

// liveSession makes a session that lives for d, as a Locker elsewhere
// would, and returns its id.
// lockNames lists, sorted, the names of the locks of any kind l.Locks
// lists.
func lockNames(ctx context.Context, l *fairlock.Locker) ([]string, error) {
	locks, err := l.Locks(ctx)
	var names []string
	for _, lk := range locks {
		if len(names) == 0 || names[len(names)-1] != lk.Name {
			names = append(names, lk.Name)
		}
	}
	return names, err
}

func liveSession(t testing.TB, rdb *redis.Client, id string, d time.Duration) string {
	t.Helper()
	ctx := context.Background()
	rdb.HSet(ctx, "fairlock:session:"+id, "", 1)
	rdb.PExpire(ctx, "fairlock:session:"+id, d)
	rdb.Set(ctx, "fairlock:session:"+id+":w", d.Milliseconds(), d)
	return id
}

func TestInspectIsBounded(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 20*time.Second)
	l := newLocker(t, srv.Client(t), fairlock.WithWaiterTTL(time.Minute), fairlock.WithLeaseTTL(time.Minute))
	held := mustAcquire(t, l, "big")
	defer released(t, held)
	session := liveSession(t, rdb, "many.1", time.Minute)
	const n = fairlock.MaxListed + 500
	p := rdb.Pipeline()
	for i := range n {
		token := fmt.Sprintf("%s:%d", session, i)
		p.RPush(ctx, "fairlock:{big}:queue", token)
		p.ZAdd(ctx, "fairlock:{big}:order", redis.Z{Score: float64(i + 1), Member: token})
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := l.Inspect(ctx, fairlock.LockMutex, "big")
	if err != nil {
		t.Fatal(err)
	}
	if st.Queued != n || len(st.Waiters) != fairlock.MaxListed {
		t.Fatalf("Queued %d, listed %d; want %d and %d", st.Queued, len(st.Waiters), n, fairlock.MaxListed)
	}
	if last := st.Waiters[len(st.Waiters)-1]; last.Position != fairlock.MaxListed || last.Token != fmt.Sprintf("%s:%d", session, fairlock.MaxListed-1) {
		t.Fatalf("last listed waiter %+v", last)
	}
}

// A forced release hands the lock on as a release would; the old holder
// learns at its next heartbeat: ErrLost on its lease, ErrNotHeld after.
func TestForceRelease(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	old, next, admin := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	if _, err := admin.ForceRelease(ctx, fairlock.LockMutex, "stuck", ""); !errors.Is(err, fairlock.ErrNotHeld) {
		t.Fatalf("ForceRelease of a free lock: %v, want ErrNotHeld", err)
	}
	held := mustAcquire(t, old, "stuck")
	w := queueBehind(t, ctx, next, "stuck")
	if _, err := admin.ForceRelease(ctx, fairlock.LockMutex, "stuck", "someone-else.1:1"); !errors.Is(err, fairlock.ErrNotHeld) {
		t.Fatalf("ForceRelease of another token: %v, want ErrNotHeld", err)
	}
	if st, _ := admin.Inspect(ctx, fairlock.LockMutex, "stuck"); !st.Held() || st.Holders[0].Token != held.Token() {
		t.Fatalf("ForceRelease of another token changed the holder: %+v", st)
	}

	res, err := admin.ForceRelease(ctx, fairlock.LockMutex, "stuck", held.Token())
	if err != nil {
		t.Fatal(err)
	}
	s, _ := await(t, w, handoff)
	if !slices.Equal(res.Ended, []string{held.Token()}) || len(res.Granted) != 1 || res.Granted[0].Token != s.Token() ||
		res.Granted[0].Fence != s.Fence() || s.Fence() <= held.Fence() {
		t.Fatalf("result %+v; old %s (fence %d), new %s (fence %d)", res, held.Token(), held.Fence(), s.Token(), s.Fence())
	}
	mustBeLost(t, ctx, admin, held, s)
	if err := s.Release(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = admin.ForceRelease(ctx, fairlock.LockMutex, "stuck", "")
	if !errors.Is(err, fairlock.ErrNotHeld) || len(res.Ended) != 0 || len(res.Granted) != 0 {
		t.Fatalf("ForceRelease after the last release: %+v, %v", res, err)
	}
}

func TestForceReleaseWithNobodyWaiting(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 10*time.Second)
	l := newLocker(t, srv.Client(t))
	held := mustAcquire(t, l, "alone")
	res, err := l.ForceRelease(ctx, fairlock.LockMutex, "alone", "")
	if err != nil || !slices.Equal(res.Ended, []string{held.Token()}) || len(res.Granted) != 0 {
		t.Fatalf("ForceRelease: %+v, %v", res, err)
	}
	if s, err := l.TryAcquire(ctx, "alone"); err != nil || s.Fence() <= held.Fence() {
		t.Fatalf("TryAcquire after a forced release: %v", err)
	} else {
		released(t, s)
	}
}

// Every kind: one holder ended by token, or all of them, grants whoever
// now fits, and every ended holder is told.
func TestForceReleaseEveryKind(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	holders, waiters, admin := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	sem, semW := mustSem(t, holders, "k", 3), mustSem(t, waiters, "k", 3)
	a, b := hold(t, permits(sem, 1)), hold(t, permits(sem, 2))
	big := queueFor(t, ctx, permits(semW, 2), fairlock.WithMetadata("big"))
	res, err := sem.ForceRelease(ctx, a.Token())
	if err != nil || !slices.Equal(res.Ended, []string{a.Token()}) || len(res.Granted) != 0 {
		t.Fatalf("ending one holder of 1 permit (2 asked, 1 free): %+v, %v", res, err)
	}
	st, _ := semW.Inspect(ctx)
	if len(st.Holders) != 1 || st.Holders[0].Token != b.Token() || st.InUse != 2 || len(st.Waiters) != 1 || st.Waiters[0].Metadata != "big" || st.Waiters[0].Permits != 2 {
		t.Fatalf("after ending one: %+v", st)
	}
	res, err = sem.ForceRelease(ctx, "")
	if err != nil || !slices.Equal(res.Ended, []string{b.Token()}) || len(res.Granted) != 1 {
		t.Fatalf("ending all: %+v, %v", res, err)
	}
	got, _ := await(t, big, handoff)
	if got.Token() != res.Granted[0].Token || got.Fence() != res.Granted[0].Fence {
		t.Fatalf("granted %s (%d), result said %+v", got.Token(), got.Fence(), res.Granted)
	}
	for _, lease := range []*fairlock.Lease{a, b} {
		select {
		case <-lease.Done():
		case <-time.After(heartbeat + slack):
			t.Fatalf("lease %s ended by force was not told within a heartbeat", lease.Token())
		}
	}
	released(t, got)

	rw, rwW := mustRW(t, holders, "k"), mustRW(t, waiters, "k")
	r1, r2 := hold(t, rw.RLock), hold(t, rw.RLock)
	writer := queueFor(t, ctx, rwW.Lock)
	if res, err := admin.ForceRelease(ctx, fairlock.LockRWMutex, "k", ""); err != nil || len(res.Ended) != 2 || len(res.Granted) != 1 {
		t.Fatalf("ending both readers: %+v, %v", res, err)
	}
	w, _ := await(t, writer, handoff)
	for _, lease := range []*fairlock.Lease{r1, r2} {
		select {
		case <-lease.Done():
		case <-time.After(heartbeat + slack):
			t.Fatal("a reader ended by force was not told within a heartbeat")
		}
	}
	if st, _ := rw.Inspect(ctx); len(st.Holders) != 1 || st.Holders[0].Shared || st.Holders[0].Token != w.Token() {
		t.Fatalf("read-write lock after ending the readers: %+v", st)
	}
	released(t, w)
}

func TestNames(t *testing.T) {
	t.Parallel()
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
	got, err := lockNames(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(odd)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("Names = %q, want %q", got, want)
	}
	if got, err := lockNames(ctx, other); err != nil || !slices.Equal(got, []string{"hidden"}) {
		t.Fatalf("Names under another prefix = %q, %v", got, err)
	}
	// A prefix is matched literally, glob characters and all.
	glob := newLocker(t, srv.Client(t), fairlock.WithKeyPrefix("p*[?]"))
	mustAcquire(t, newLocker(t, srv.Client(t), fairlock.WithKeyPrefix("pX[?]")), "not-mine")
	mustAcquire(t, glob, "mine")
	if got, err := lockNames(ctx, glob); err != nil || !slices.Equal(got, []string{"mine"}) {
		t.Fatalf("Names under a prefix with glob characters = %q, %v", got, err)
	}
}
