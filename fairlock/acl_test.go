package fairlock_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/fairlock/fairlock/scripts"
)

// The ACL rule of docs/operations.md is enough for everything a lock user
// does: the commands inside the scripts are checked against it too.
func TestACLRuleIsEnough(t *testing.T) {
	t.Parallel()
	primary := redistest.Start(t, "--repl-diskless-sync-delay", "0")
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", fmt.Sprint(primary.Port))
	primary.SetUser(t, redistest.DocACLRule(t, "../docs/operations.md", "fairlock-app"))
	ctx := withTimeout(t, 30*time.Second)
	for !strings.Contains(replica.Client(t).Info(ctx, "replication").Val(), "master_link_status:up") {
		time.Sleep(20 * time.Millisecond)
	}
	a := newLocker(t, primary.ClientAs(t, "fairlock-app", "app-secret"))
	b := newLocker(t, primary.ClientAs(t, "fairlock-app", "app-secret"))

	s, err := a.TryAcquire(ctx, "acl", fairlock.WithMetadata("holder"))
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if st, err := b.Inspect(ctx, fairlock.LockMutex, "acl"); err != nil || !st.Held() || st.Holders[0].Token != s.Token() || st.Holders[0].Metadata != "holder" {
		t.Fatalf("Inspect: %+v, %v", st, err)
	}
	// Contended: b queues, a's Release grants it through PUBLISH.
	w := queueBehind(t, ctx, b, "acl", fairlock.WithMetadata("waiter"))
	// The heartbeat renews a's lease past its TTL, also after SCRIPT FLUSH
	// (the heartbeat pipeline then reloads its script with SCRIPT LOAD).
	time.Sleep(leaseTTL / 2)
	primary.Client(t).ScriptFlush(ctx)
	time.Sleep(leaseTTL)
	if s.Err() != nil {
		t.Fatalf("lease not renewed under the ACL rule: %v", s.Err())
	}
	// A Release whose PUBLISH Redis refused says so (TestACLWithoutTheRule),
	// so a nil error is the proof that the rule lets the grant's message
	// through. The waiter's bound is its heartbeat's, for a loaded machine:
	// under -race with a core busy, 300 ms once went by.
	if err := s.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	next, _ := await(t, w, heartbeat+slack)
	if err := next.Extend(ctx, leaseTTL); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if err := next.Release(ctx); err != nil {
		t.Fatalf("Release of the handed-off lease: %v", err)
	}
	acked := newLocker(t, primary.ClientAs(t, "fairlock-app", "app-secret"), fairlock.WithReplicaAck(1, time.Second))
	s, err = acked.Acquire(ctx, "acl")
	if err != nil {
		t.Fatalf("Acquire with WithReplicaAck (WAIT): %v", err)
	}
	released(t, s)
	if err := a.Do(ctx, "acl", func(context.Context) error { return nil }); err != nil {
		t.Fatalf("Do: %v", err)
	}

	// The semaphore and the read-write lock: a grant of several waiters,
	// renewal across SCRIPT FLUSH, Extend, Try, Inspect, and a dead holder's
	// permits reaped.
	sa, sb := mustSem(t, a, "acl", 2), mustSem(t, b, "acl", 2)
	full := hold(t, permits(sa, 2))
	waits := []<-chan result{queueFor(t, ctx, permits(sb, 1)), queueFor(t, ctx, permits(sb, 1))}
	primary.Client(t).ScriptFlush(ctx)
	time.Sleep(leaseTTL)
	if _, err := sb.TryAcquire(ctx, 1); !errors.Is(err, fairlock.ErrNotAcquired) {
		t.Fatalf("semaphore TryAcquire: %v", err)
	}
	if st, err := sb.Inspect(ctx); err != nil || st.InUse != 2 || len(st.Waiters) != 2 {
		t.Fatalf("semaphore Inspect: %+v, %v", st, err)
	}
	if err := full.Release(ctx); err != nil {
		t.Fatalf("semaphore Release: %v", err)
	}
	for _, w := range waits {
		got, _ := await(t, w, handoff)
		if err := got.Extend(ctx, leaseTTL); err != nil {
			t.Fatalf("semaphore Extend: %v", err)
		}
		released(t, got)
	}
	ma, mb := mustRW(t, a, "acl"), mustRW(t, b, "acl")
	writer := hold(t, ma.Lock)
	reader := queueFor(t, ctx, mb.RLock)
	if st, err := mb.Inspect(ctx); err != nil || len(st.Holders) != 1 || st.Holders[0].Shared || len(st.Waiters) != 1 {
		t.Fatalf("read-write Inspect: %+v, %v", st, err)
	}
	released(t, writer)
	r, _ := await(t, reader, handoff)
	released(t, r)

	// An election: a campaign, a value proclaimed, an observer and a
	// resignation.
	ea, eb := mustElection(t, a, "acl"), mustElection(t, b, "acl")
	seen := observeAll(t, eb)
	term := elect(t, ctx, ea, "a")
	if err := term.Proclaim(ctx, "a again"); err != nil {
		t.Fatalf("Proclaim: %v", err)
	}
	now := fairlock.Leader{Value: "a again", Epoch: term.Epoch(), Revision: 2}
	mustLead(t, eb, now)
	seen.awaitSeen(t, now, heartbeat+slack)
	if err := term.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}

	// A MultiMutex: its request to both mutexes goes in one MULTI/EXEC,
	// after SCRIPT FLUSH (so SCRIPT LOAD), and waits for one of them.
	blocker := mustAcquire(t, b, "acl-m2")
	primary.Client(t).ScriptFlush(ctx)
	both := make(chan error, 1)
	go func() {
		ml, err := mustMulti(t, a, "acl-m1", "acl-m2").Acquire(ctx)
		if err == nil {
			err = ml.Release(ctx)
		}
		both <- err
	}()
	time.Sleep(2 * a.Heartbeat())
	released(t, blocker)
	if err := <-both; err != nil {
		t.Fatalf("MultiMutex: %v", err)
	}

	// A grouped semaphore: its scans, due once a heartbeat, visit its
	// parties (HSCAN).
	ga, gb := groupSem(t, a, "acl-groups", 1, 1), groupSem(t, b, "acl-groups", 1, 1)
	first := hold(t, groupPermits(ga, 1, "tenant-a"))
	second := queueFor(t, ctx, groupPermits(gb, 1, "tenant-b"))
	time.Sleep(2 * b.Heartbeat())
	released(t, first)
	got, _ := await(t, second, heartbeat+slack)
	released(t, got)

	// Two waiters of one Locker: the heartbeat asks about the second
	// without the script (ZMSCORE).
	held := mustAcquire(t, a, "acl-two")
	two := []<-chan result{queueBehind(t, ctx, b, "acl-two"), queueBehind(t, ctx, b, "acl-two")}
	time.Sleep(2 * b.Heartbeat())
	released(t, held)
	for _, w := range two {
		got, _ := await(t, w, handoff)
		released(t, got)
	}
	// Nothing was refused, not even a command whose error only the next
	// heartbeat would notice (a lease read-back, a check on waiters).
	// But go-redis's CLIENT SETINFO on connect: Redis 7.2 and later and
	// Valkey log its refusal, which go-redis ignores, and the rule cannot
	// name it, since Redis 7.0 does not know it (docs/operations.md).
	log, _ := primary.Client(t).Do(ctx, "ACL", "LOG").Val().([]any)
	var refused []any
	for _, e := range log {
		if m, ok := e.(map[any]any); !ok || m["object"] != "client|setinfo" {
			refused = append(refused, e)
		}
	}
	if len(refused) > 0 {
		t.Fatalf("ACL LOG after the run: %v", refused)
	}
}

// The rule names every command the scripts run: Redis checks each against
// it, and one that only a rare path runs (a scan after a rollback) would
// fail there alone.
func TestACLRuleNamesEveryScriptCommand(t *testing.T) {
	t.Parallel()
	rule := redistest.DocACLRule(t, "../docs/operations.md", "fairlock-app") + " "
	call := regexp.MustCompile(`redis\.p?call\('([A-Za-z_]+)'`)
	for name, src := range scripts.All() {
		for _, m := range call.FindAllStringSubmatch(src, -1) {
			if cmd := strings.ToLower(m[1]); !strings.Contains(rule, " +"+cmd+" ") {
				t.Errorf("%s runs %s, which the ACL rule of docs/operations.md does not name", name, m[1])
			}
		}
	}
}

// A user without the rule gets an error from its first call, promptly.
func TestACLWithoutTheRule(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	srv.SetUser(t, "ACL SETUSER elsewhere on >pw resetkeys resetchannels ~other:* &other:* +@all")
	srv.SetUser(t, "ACL SETUSER nothing on >pw -@all")
	for _, user := range []string{"elsewhere", "nothing"} {
		t.Run(user, func(t *testing.T) {
			l := newLocker(t, srv.ClientAs(t, user, "pw"))
			for what, call := range map[string]func(ctx context.Context) error{
				"Acquire":    func(ctx context.Context) error { _, err := l.Acquire(ctx, "x"); return err },
				"TryAcquire": func(ctx context.Context) error { _, err := l.TryAcquire(ctx, "x"); return err },
				"Inspect":    func(ctx context.Context) error { _, err := l.Inspect(ctx, fairlock.LockMutex, "x"); return err },
			} {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				start := time.Now()
				err := call(ctx)
				took := time.Since(start)
				cancel()
				if err == nil || errors.Is(err, context.DeadlineExceeded) || took > heartbeat+slack {
					t.Errorf("%s: %v after %v, want a prompt error", what, err, took)
				} else if !strings.Contains(err.Error(), "NOPERM") && !strings.Contains(err.Error(), "WRONGPASS") {
					t.Errorf("%s: %v, want it to say NOPERM", what, err)
				}
				t.Logf("%s as %s: %v (%v)", what, user, err, took.Round(time.Millisecond))
			}
		})
	}
}

// A user whose rule lacks the channel pattern: an Acquire that has to wait
// fails at once with Redis's refusal of the subscription, not a heartbeat
// later (one that finds the lock free takes the fast path, which needs no
// subscription); a Release
// that hands the lock on says that the hand-off was written and only its
// notification was refused.
func TestACLWithoutTheChannels(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	srv.SetUser(t, "ACL SETUSER nochannels on >pw resetkeys resetchannels ~fairlock:* +@all")
	ctx := withTimeout(t, 20*time.Second)
	// A long heartbeat, so that waiting one would show.
	slow := []fairlock.Option{fairlock.WithLeaseTTL(30 * time.Second), fairlock.WithWaiterTTL(30 * time.Second)}
	var cancelled atomic.Int32 // each failed Acquire reports its end
	observe := fairlock.WithObserver(func(e fairlock.Event) {
		if e.Kind == fairlock.EventCancelled && e.Err != nil && strings.Contains(e.Err.Error(), "NOPERM") {
			cancelled.Add(1)
		}
	})
	l := newLocker(t, srv.ClientAs(t, "nochannels", "pw"), append(slow, observe)...)
	holder := mustAcquire(t, newLocker(t, srv.Client(t)), "x")
	for range 2 { // the second time on the connection the first one opened
		start := time.Now()
		_, err := l.Acquire(ctx, "x")
		if took := time.Since(start); err == nil || !strings.Contains(err.Error(), "NOPERM") || took > time.Second {
			t.Fatalf("Acquire: %v after %v, want NOPERM at once", err, took)
		}
		t.Logf("Acquire: %v", err)
	}

	if n := cancelled.Load(); n != 2 {
		t.Errorf("%d EventCancelled for 2 Acquires refused their subscription, want 2", n)
	}
	released(t, holder)
	s, err := l.TryAcquire(ctx, "x") // TryAcquire does not subscribe
	if err != nil {
		t.Fatal(err)
	}
	w := queueBehind(t, ctx, newLocker(t, srv.Client(t)), "x")
	err = s.Release(ctx)
	if !errors.Is(err, fairlock.ErrReleased) || !strings.Contains(err.Error(), "handed to the next waiter") || !strings.Contains(err.Error(), "channel pattern") {
		t.Fatalf("Release whose notification was refused: %v, want ErrReleased saying so", err)
	}
	t.Logf("Release: %v", err)
	if !errors.Is(s.Err(), fairlock.ErrReleased) {
		t.Fatalf("lease after the Release: %v", s.Err())
	}
	next, _ := await(t, w, heartbeat+slack) // from its heartbeat
	released(t, next)
}

// A heartbeat's read-back of held leases that Redis refuses is reported
// (EventHeartbeatFailed), not dropped: the documented rule once lacked
// MGET, and nothing said so.
func TestLeaseReadBackRefusalIsReported(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	srv.SetUser(t, strings.Replace(redistest.DocACLRule(t, "../docs/operations.md", "fairlock-app"), " +mget", "", 1))
	refused := make(chan fairlock.Event, 16)
	l := newLocker(t, srv.ClientAs(t, "fairlock-app", "app-secret"), fairlock.WithObserver(func(e fairlock.Event) {
		if e.Kind == fairlock.EventHeartbeatFailed && strings.Contains(fmt.Sprint(e.Err), "NOPERM") {
			select {
			case refused <- e:
			default:
			}
		}
	}))
	s := mustAcquire(t, l, "readback")
	select {
	case e := <-refused:
		t.Logf("reported: %v", e.Err)
	case <-time.After(heartbeat + slack):
		t.Fatal("a refused read-back of a held lease was not reported within a heartbeat")
	}
	released(t, s)
}
