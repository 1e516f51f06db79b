package fairlock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// metaKey is where the metadata of the waiters and the holder of name are.
func metaKey(name string) string { return "fairlock:{" + name + "}:meta" }

// metaFields returns the tokens that have metadata stored for name, and
// fails if the hash exists without a TTL.
func metaFields(t testing.TB, rdb *redis.Client, name string) []string {
	t.Helper()
	// One transaction, so a heartbeat that removes the last field between
	// the two reads does not look like a hash without a TTL.
	var keys *redis.StringSliceCmd
	var ttl *redis.DurationCmd
	_, err := rdb.TxPipelined(context.Background(), func(p redis.Pipeliner) error {
		keys = p.HKeys(context.Background(), metaKey(name))
		ttl = p.PTTL(context.Background(), metaKey(name))
		return nil
	})
	if err != nil {
		t.Fatalf("reading the metadata hash of %q: %v", name, err)
	}
	if fields := keys.Val(); len(fields) > 0 && ttl.Val() <= 0 {
		t.Errorf("metadata hash of %q has no TTL (%v)", name, ttl.Val())
	}
	return keys.Val()
}

// Metadata goes with the waiter, then with its grant, and is shown by
// Inspect; each entry goes when its token leaves.
func TestMetadataFollowsWaiterAndGrant(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 20*time.Second)
	l := newLocker(t, srv.Client(t))
	held := mustAcquire(t, l, "m", fairlock.WithMetadata("host a, job 7"))
	first := queueBehind(t, ctx, newLocker(t, srv.Client(t)), "m", fairlock.WithMetadata("job 8"))
	second := queueBehind(t, ctx, newLocker(t, srv.Client(t)), "m")
	leaving, leave := context.WithCancel(ctx)
	third := queueBehind(t, leaving, newLocker(t, srv.Client(t)), "m", fairlock.WithMetadata("job 9"))

	st, err := l.Inspect(ctx, fairlock.LockMutex, "m")
	if err != nil {
		t.Fatal(err)
	}
	if st.Holders[0].Metadata != "host a, job 7" || len(st.Waiters) != 3 || st.Waiters[0].Metadata != "job 8" || st.Waiters[1].Metadata != "" || st.Waiters[2].Metadata != "job 9" {
		t.Fatalf("Inspect: %+v", st)
	}
	if got := metaFields(t, rdb, "m"); len(got) != 3 {
		t.Fatalf("metadata stored for %q, want the holder, the first and the third", got)
	}

	leave()
	if r := <-third; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled Acquire: %v", r.err)
	}
	if got := metaFields(t, rdb, "m"); len(got) != 2 || slices.Contains(got, st.Waiters[2].Token) {
		t.Fatalf("after the third waiter left: metadata of %q", got)
	}
	released(t, held)
	a, _ := await(t, first, handoff)
	if st, _ := l.Inspect(ctx, fairlock.LockMutex, "m"); st.Holders[0].Token != a.Token() || st.Holders[0].Metadata != "job 8" {
		t.Fatalf("Inspect after the hand-off: %+v", st)
	}
	if got := metaFields(t, rdb, "m"); len(got) != 1 || got[0] != a.Token() {
		t.Fatalf("after the hand-off: metadata of %q, want only %s", got, a.Token())
	}
	released(t, a)
	b, _ := await(t, second, handoff)
	if st, _ := l.Inspect(ctx, fairlock.LockMutex, "m"); st.Holders[0].Token != b.Token() || st.Holders[0].Metadata != "" {
		t.Fatalf("Inspect of a holder without metadata: %+v", st)
	}
	released(t, b)
	if n := rdb.Exists(ctx, metaKey("m")).Val(); n != 0 {
		t.Fatalf("metadata hash left after every release: %q", rdb.HKeys(ctx, metaKey("m")).Val())
	}
}

// Entries of tokens that leave without a release go too: a dead waiter
// skipped by a grant, a holder forced out, a holder whose lease vanished
// (found by its own heartbeat), and a waiter that lost its place.
func TestMetadataOfTokensThatLeaveOtherwise(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 20*time.Second)
	l := newLocker(t, srv.Client(t))

	held := mustAcquire(t, l, "d", fairlock.WithMetadata("holder"))
	gone := goneWaiter(t, rdb, "", "d")
	rdb.HSet(ctx, metaKey("d"), gone, "dead waiter")
	next := queueBehind(t, ctx, newLocker(t, srv.Client(t)), "d", fairlock.WithMetadata("next"))
	released(t, held)
	s, _ := await(t, next, handoff)
	if got := metaFields(t, rdb, "d"); len(got) != 1 || got[0] != s.Token() {
		t.Fatalf("after a grant that skipped a dead waiter: metadata of %q", got)
	}
	if _, err := l.ForceRelease(ctx, fairlock.LockMutex, "d", s.Token()); err != nil {
		t.Fatal(err)
	}
	if got := metaFields(t, rdb, "d"); len(got) != 0 {
		t.Fatalf("after ForceRelease: metadata of %q", got)
	}

	lost := mustAcquire(t, l, "v", fairlock.WithMetadata("vanishing"))
	rdb.Del(ctx, "fairlock:{v}:lock")
	select {
	case <-lost.Done():
	case <-time.After(heartbeat + slack):
		t.Fatal("lease not lost")
	}
	deadline := time.Now().Add(heartbeat + slack)
	for len(metaFields(t, rdb, "v")) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after the holder's heartbeat found its lease gone: metadata of %q", metaFields(t, rdb, "v"))
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A waiter that lost its place (Redis forgot it): its heartbeat tells
	// it, and it queues anew under a new token; the old token's entry goes.
	blocker := mustAcquire(t, l, "e")
	late := newLocker(t, srv.Client(t))
	claim := queueBehind(t, ctx, late, "e", fairlock.WithMetadata("late"))
	old := metaFields(t, rdb, "e")[0]
	rdb.ZRem(ctx, "fairlock:{e}:order", old)
	rdb.LRem(ctx, "fairlock:{e}:queue", 1, old)
	deadline = time.Now().Add(heartbeat + slack)
	for slices.Contains(metaFields(t, rdb, "e"), old) {
		if time.Now().After(deadline) {
			t.Fatalf("the metadata of a waiter that lost its place outlived a heartbeat: %q", metaFields(t, rdb, "e"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	released(t, blocker)
	s2, _ := await(t, claim, heartbeat+slack)
	if got := metaFields(t, rdb, "e"); len(got) != 1 || got[0] != s2.Token() {
		t.Fatalf("after a lost place and a new one: metadata of %q, lease %s", got, s2.Token())
	}
	released(t, s2)
}

// countCommands counts what a client sends.
type countCommands struct{ n atomic.Int64 }

func (c *countCommands) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *countCommands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *countCommands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

func TestMetadataTooLong(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 10*time.Second)
	client := srv.Client(t)
	counter := &countCommands{}
	client.AddHook(counter)
	l := newLocker(t, client)
	long := strings.Repeat("x", fairlock.MaxMetadataLen+1)
	for what, call := range map[string]func() error{
		"Acquire":    func() error { _, err := l.Acquire(ctx, "long", fairlock.WithMetadata(long)); return err },
		"TryAcquire": func() error { _, err := l.TryAcquire(ctx, "long", fairlock.WithMetadata(long)); return err },
	} {
		err := call()
		if !errors.Is(err, fairlock.ErrInvalid) || !strings.Contains(err.Error(), "MaxMetadataLen") || len(err.Error()) > 200 {
			t.Errorf("%s with %d bytes of metadata: %v, want a short ErrInvalid", what, len(long), err)
		}
	}
	if n := counter.n.Load(); n != 0 {
		t.Errorf("%d Redis commands sent for refused metadata", n)
	}
	if keys := rdb.Keys(ctx, "*").Val(); len(keys) != 0 {
		t.Errorf("keys written for refused metadata: %q", keys)
	}
	s, err := l.TryAcquire(ctx, "long", fairlock.WithMetadata(long[1:]))
	if err != nil {
		t.Fatalf("TryAcquire with MaxMetadataLen bytes of metadata: %v", err)
	}
	if st, _ := l.Inspect(ctx, fairlock.LockMutex, "long"); st.Holders[0].Metadata != long[1:] {
		t.Errorf("Inspect shows %d bytes of metadata, want %d", len(st.Holders[0].Metadata), len(long)-1)
	}
	released(t, s)
}

// Without metadata, an uncontended cycle runs acquire_fast.lua's EXISTS
// of the session, SET of the lock, EXISTS of the order set, and the
// fence's GET, TIME and SET; then release_fast.lua's EXISTS, GET, DEL and
// HINCRBY of the session's count. With it, the acquire script instead
// (it writes the metadata): HMGET of the session (does it live, did it
// withdraw the token) and GET of its waiters' key, ZCARD of the queue
// (does anyone wait), GET of the lock, the fence's GET, TIME and SET, SET
// of the lock, and for the metadata HSET, PEXPIRE GT and NX on the new
// hash (keep.lua); then the release script's HDEL that removes the
// metadata hash again, GET and DEL of the lock, ZRANGE of its order set
// (does anyone wait), and HINCRBY of the session's count.
func TestMetadataCostsNoCommandWhenUnset(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := withTimeout(t, 10*time.Second)
	// A heartbeat too slow to come during the cycles.
	l := newLocker(t, srv.Client(t), fairlock.WithLeaseTTL(30*time.Second), fairlock.WithWaiterTTL(30*time.Second))
	// The subscription, the scripts and the fence key made.
	mustAcquire(t, l, "cost").Release(ctx)
	mustAcquire(t, l, "cost", fairlock.WithMetadata("warm")).Release(ctx)
	for _, tc := range []struct {
		opts []fairlock.AcquireOption
		want string
	}{
		{nil, "del=10 evalsha=20 exists=30 get=20 hincrby=10 set=20 time=10"},
		{[]fairlock.AcquireOption{fairlock.WithMetadata("job 7")}, "del=10 evalsha=20 get=40 hdel=10 hincrby=10 hmget=10 hset=10 pexpire=20 set=20 time=10 zcard=10 zrange=10"},
	} {
		rdb.ConfigResetStat(ctx)
		for range 10 {
			if err := mustAcquire(t, l, "cost", tc.opts...).Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		var ran []string
		for _, line := range strings.Split(rdb.Info(ctx, "commandstats").Val(), "\n") {
			if stat, ok := strings.CutPrefix(line, "cmdstat_"); ok {
				name, rest, _ := strings.Cut(stat, ":calls=")
				calls, _, _ := strings.Cut(rest, ",")
				if !strings.HasPrefix(name, "config") && name != "info" {
					ran = append(ran, name+"="+calls)
				}
			}
		}
		slices.Sort(ran)
		if got := strings.Join(ran, " "); got != tc.want {
			t.Errorf("uncontended cycles with %d options ran %q, want %q", len(tc.opts), got, tc.want)
		}
	}
}
