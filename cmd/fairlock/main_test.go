package main

import (
	"bytes"
	"context"
	"encoding/json"
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

const (
	leaseTTL  = time.Second
	waiterTTL = 600 * time.Millisecond
)

// cli runs the command in-process and returns its exit code and output.
func cli(t testing.TB, ctx context.Context, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(ctx, args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func newLocker(t testing.TB, c redis.UniversalClient) *fairlock.Locker {
	t.Helper()
	l, err := fairlock.New(c, fairlock.WithLeaseTTL(leaseTTL), fairlock.WithWaiterTTL(waiterTTL))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func acquire(t testing.TB, l *fairlock.Locker, name string, opts ...fairlock.AcquireOption) *fairlock.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := l.Acquire(ctx, name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// queue starts an Acquire of name on l and returns once it is queued; the
// lease arrives on the channel.
func queue(t testing.TB, ctx context.Context, l *fairlock.Locker, name string, opts ...fairlock.AcquireOption) <-chan *fairlock.Lease {
	t.Helper()
	out := make(chan *fairlock.Lease, 1)
	queued := make(chan struct{})
	go func() {
		var once sync.Once
		opts := append([]fairlock.AcquireOption{fairlock.OnQueued(func(int) { once.Do(func() { close(queued) }) })}, opts...)
		s, err := l.Acquire(ctx, name, opts...)
		if err != nil && ctx.Err() == nil && !errors.Is(err, fairlock.ErrClosed) {
			t.Errorf("Acquire: %v", err)
		}
		out <- s
	}()
	select {
	case <-queued:
	case <-time.After(5 * time.Second):
		t.Fatal("waiter never queued")
	}
	return out
}

func withTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestHelpListsTheCommands(t *testing.T) {
	code, _, stderr := cli(t, context.Background(), "", "-h")
	if code != exitOK {
		t.Errorf("-h exit code %d", code)
	}
	for _, c := range order {
		if !strings.Contains(stderr, "\n  "+c) {
			t.Errorf("-h does not list %s:\n%s", c, stderr)
		}
	}
	for _, args := range [][]string{{}, {"frobnicate"}, {"inspect"}, {"inspect", "a", "b"}, {"list", "x"}, {"-redis", "redis://127.0.0.1:1", "release", "x"}} {
		if code, _, _ := cli(t, context.Background(), "", args...); code != exitUsage {
			t.Errorf("%q: exit code %d, want %d", args, code, exitUsage)
		}
	}
	t.Setenv("REDIS_URL", "")
	if code, _, stderr := cli(t, context.Background(), "", "list"); code != exitUsage || !strings.Contains(stderr, "REDIS_URL") {
		t.Errorf("no Redis given: exit %d, %s", code, stderr)
	}
}

func TestInspect(t *testing.T) {
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	url := "redis://" + srv.Addr
	held := acquire(t, newLocker(t, srv.Client(t)), "job:7", fairlock.WithMetadata("host a, pid 7"))
	w1 := queue(t, ctx, newLocker(t, srv.Client(t)), "job:7", fairlock.WithMetadata("host b"))
	w2 := queue(t, ctx, newLocker(t, srv.Client(t)), "job:7")

	code, out, stderr := cli(t, ctx, "", "-redis", url, "inspect", "job:7")
	if code != exitOK {
		t.Fatalf("inspect: exit %d: %s", code, stderr)
	}
	t.Logf("inspect:\n%s", out)
	for _, want := range []string{"lock     job:7\n", "holder   " + held.Token() + `  "host a, pid 7"` + "\n", "fence    ", "waiters  2\n", "     1  ", "     2  ", "deadline in ", `  "host b"` + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q", want)
		}
	}

	t.Setenv("REDIS_URL", url) // the URL from the environment this time
	code, out, stderr = cli(t, ctx, "", "inspect", "-json", "job:7")
	if code != exitOK {
		t.Fatalf("inspect -json: exit %d: %s", code, stderr)
	}
	var got lockJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("inspect -json printed %q: %v", out, err)
	}
	if got.Name != "job:7" || !got.Held || got.Holder != held.Token() || got.Metadata != "host a, pid 7" || got.Fence < held.Fence() || got.TTLMs <= 0 || got.TTLMs > leaseTTL.Milliseconds() || len(got.Waiters) != 2 {
		t.Fatalf("inspect -json: %+v", got)
	}
	if got.Waiters[0].Metadata != "host b" || got.Waiters[1].Metadata != "" {
		t.Fatalf("inspect -json waiters' metadata: %+v", got.Waiters)
	}
	var raw map[string]any
	json.Unmarshal([]byte(out), &raw)
	for _, field := range []string{"name", "held", "holder", "metadata", "fence", "ttl_ms", "waiters"} {
		if _, ok := raw[field]; !ok {
			t.Errorf("inspect -json lacks %q: %s", field, out)
		}
	}
	for i, w := range got.Waiters {
		if w.Position != i+1 || w.DeadlineMs <= 0 || w.DeadlineMs > waiterTTL.Milliseconds() || w.Token == "" {
			t.Errorf("waiter %d: %+v", i, w)
		}
	}
	held.Release(ctx)
	first := <-w1
	if first.Token() != got.Waiters[0].Token {
		t.Errorf("granted %s first, inspect listed %s", first.Token(), got.Waiters[0].Token)
	}
	first.Release(ctx)
	(<-w2).Release(ctx)

	code, out, _ = cli(t, ctx, "", "inspect", "-json", "job:7")
	if code != exitOK || !strings.Contains(out, `"held":false`) || !strings.Contains(out, `"waiters":[]`) || strings.Contains(out, "semaphore") {
		t.Errorf("inspect -json of a free lock: exit %d: %s", code, out)
	}

	// The semaphore and the read-write lock of the same name.
	l := newLocker(t, srv.Client(t))
	sem, _ := l.Semaphore("job:7", 3)
	if _, err := sem.Acquire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	rw, _ := l.RWMutex("job:7")
	if _, err := rw.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = cli(t, ctx, "", "inspect", "job:7")
	for _, want := range []string{"semaphore  2 of 3 permits held by 1 leases, 0 waiting", "rwmutex    held by a writer, 0 waiting"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("inspect with a semaphore and a read-write lock lacks %q: exit %d: %s %s", want, code, out, stderr)
		}
	}
	code, out, _ = cli(t, ctx, "", "inspect", "-json", "job:7")
	if code != exitOK || !strings.Contains(out, `"semaphore":{"capacity":3,"in_use":2,"holders":1,"waiters":0,`) || !strings.Contains(out, `"rwmutex":{"writer":true,"readers":0,"waiters":0,`) {
		t.Errorf("inspect -json with a semaphore and a read-write lock: exit %d: %s", code, out)
	}
}

// The forced hand-off from the command line: confirmation, output, and what
// the old holder sees.
func TestReleaseForce(t *testing.T) {
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	url := "redis://" + srv.Addr
	old := newLocker(t, srv.Client(t))
	held := acquire(t, old, "stuck")
	next := queue(t, ctx, newLocker(t, srv.Client(t)), "stuck")

	if code, _, stderr := cli(t, ctx, "", "-redis", url, "release", "stuck"); code != exitUsage || !strings.Contains(stderr, "-force") {
		t.Errorf("release without -force: exit %d: %s", code, stderr)
	}
	code, out, stderr := cli(t, ctx, "n\n", "-redis", url, "release", "-force", "stuck")
	if code != exitError || !strings.Contains(out, "[y/N]") || !strings.Contains(stderr, "nothing changed") {
		t.Errorf("release answered n: exit %d: %s %s", code, out, stderr)
	}
	if held.Err() != nil {
		t.Fatalf("an unconfirmed release ended the lease: %v", held.Err())
	}

	code, out, stderr = cli(t, ctx, "y\n", "-redis", url, "release", "-force", "stuck")
	if code != exitOK {
		t.Fatalf("release -force: exit %d: %s", code, stderr)
	}
	t.Logf("release -force:\n%s", out)
	s := <-next
	if s == nil {
		t.Fatal("the next waiter was not granted")
	}
	for _, want := range []string{"holder " + held.Token(), "the lock passes to " + s.Token(), "ended    " + held.Token(), fmt.Sprintf("granted  %s (fence %d)", s.Token(), s.Fence())} {
		if !strings.Contains(out, want) {
			t.Errorf("release output lacks %q", want)
		}
	}
	if s.Fence() <= held.Fence() {
		t.Errorf("fence did not advance: %d then %d", held.Fence(), s.Fence())
	}
	select {
	case <-held.Done():
	case <-time.After(old.Heartbeat() + 500*time.Millisecond):
		t.Fatal("old holder not told within a heartbeat")
	}
	if !errors.Is(held.Err(), fairlock.ErrLost) {
		t.Errorf("old lease: %v, want ErrLost", held.Err())
	}
	if err := held.Release(ctx); !errors.Is(err, fairlock.ErrNotHeld) {
		t.Errorf("old holder's Release: %v, want ErrNotHeld", err)
	}
	s.Release(ctx)

	code, out, stderr = cli(t, ctx, "", "-redis", url, "release", "-force", "-yes", "stuck")
	if code != exitError || !strings.Contains(stderr, "not held") {
		t.Errorf("release of a free lock: exit %d: %s %s", code, out, stderr)
	}
	acquire(t, old, "stuck")
	code, out, stderr = cli(t, ctx, "", "-redis", url, "release", "-force", "-yes", "stuck")
	if code != exitOK || !strings.Contains(out, "granted  nobody") || strings.Contains(out, "[y/N]") {
		t.Errorf("release -yes with nobody waiting: exit %d: %s %s", code, out, stderr)
	}
}

func TestList(t *testing.T) {
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	url := "redis://" + srv.Addr
	l := newLocker(t, srv.Client(t))
	for _, name := range []string{"b{1}", "a b", "c%"} {
		acquire(t, l, name)
	}
	acquire(t, l, "gone").Release(ctx)
	sem, _ := l.Semaphore("b{1}", 2)
	if _, err := sem.Acquire(ctx, 2); err != nil {
		t.Fatal(err)
	}
	rw, _ := l.RWMutex("d")
	if _, err := rw.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := cli(t, ctx, "", "-redis", url, "list")
	if want := "\"a b\"\nb{1}\nb{1}  (semaphore)\nc%\nd  (rwmutex)\n"; code != exitOK || out != want {
		t.Errorf("list: exit %d: %q (want %q) %s", code, out, want, stderr)
	}
	if code, out, _ := cli(t, ctx, "", "-redis", url, "-prefix", "other", "list"); code != exitOK || out != "" {
		t.Errorf("list under another prefix: exit %d: %q", code, out)
	}
}

func TestWatchMarksGrantsAndNewWaiters(t *testing.T) {
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	l := newLocker(t, srv.Client(t))
	held := acquire(t, l, "w")
	type result struct {
		code        int
		out, stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, out, stderr := cli(t, ctx, "", "-redis", "redis://"+srv.Addr, "watch", "-every", "100ms", "-count", "8", "w")
		done <- result{code, out, stderr}
	}()
	time.Sleep(150 * time.Millisecond)
	w := queue(t, ctx, newLocker(t, srv.Client(t)), "w", fairlock.WithMetadata("job 12"))
	time.Sleep(250 * time.Millisecond)
	held.Release(ctx)
	s := <-w
	r := <-done
	t.Logf("watch:\n%s", r.out)
	if r.code != exitOK {
		t.Fatalf("watch: exit %d: %s", r.code, r.stderr)
	}
	if n := strings.Count(r.out, "--- "); n != 8 {
		t.Errorf("%d readings, want 8", n)
	}
	for _, want := range []string{"+ " + s.Token() + `  "job 12" queued at position 1`, fmt.Sprintf(`* granted to %s  "job 12" (fence %d)`, s.Token(), s.Fence())} {
		if !strings.Contains(r.out, want) {
			t.Errorf("watch output lacks %q", want)
		}
	}
	s.Release(ctx)

	// Until interrupted: the context's end is a normal exit.
	stop, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if code, _, stderr := cli(t, stop, "", "-redis", "redis://"+srv.Addr, "watch", "-every", "50ms", "w"); code != exitOK {
		t.Errorf("interrupted watch: exit %d: %s", code, stderr)
	}
}

// list, inspect and release on a Redis Cluster, found out from the server
// itself, with the lock users and the read-only user under the README's
// ACL rules.
func TestOnRedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 6-node Redis Cluster")
	}
	c := redistest.StartCluster(t)
	ctx := withTimeout(t, 60*time.Second)
	for _, node := range c.Nodes {
		node.SetUser(t, redistest.DocACLRule(t, "../../README.md", "fairlock-app"))
		node.SetUser(t, redistest.DocACLRule(t, "../../README.md", "fairlock-ops"))
	}
	// The lock users run under the README's rule, on a ClusterClient.
	app := &redis.ClusterOptions{Username: "fairlock-app", Password: "app-secret"}
	l := newLocker(t, c.Client(t, app))
	names := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta"}
	var leases []*fairlock.Lease
	for _, name := range names {
		leases = append(leases, acquire(t, l, name))
	}
	w := queue(t, ctx, newLocker(t, c.Client(t, app)), "alpha")
	url := "redis://" + c.Addrs[0]
	code, out, stderr := cli(t, ctx, "", "-redis", url, "list")
	if want := "alpha\nbeta\ndelta\nepsilon\ngamma\nzeta\n"; code != exitOK || out != want {
		t.Fatalf("list on a Cluster: exit %d: %q (want %q) %s", code, out, want, stderr)
	}
	code, out, stderr = cli(t, ctx, "", "-redis", url, "inspect", "-json", "alpha")
	var got lockJSON
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil || !got.Held || len(got.Waiters) != 1 {
		t.Fatalf("inspect on a Cluster: exit %d: %s %s", code, out, stderr)
	}
	ro := "redis://fairlock-ops:ops-secret@" + c.Addrs[1]
	if code, out, stderr := cli(t, ctx, "", "-redis", ro, "list"); code != exitOK || strings.Count(out, "\n") != len(names) {
		t.Errorf("list on a Cluster as the read-only user: exit %d: %q %s", code, out, stderr)
	}
	if code, out, stderr := cli(t, ctx, "", "-redis", ro, "inspect", "alpha"); code != exitOK || !strings.Contains(out, "holder   "+got.Holder) {
		t.Errorf("inspect on a Cluster as the read-only user: exit %d: %q %s", code, out, stderr)
	}
	if code, out, stderr := cli(t, ctx, "", "-redis", ro, "watch", "-every", "50ms", "-count", "2", "alpha"); code != exitOK || !strings.Contains(out, got.Holder) {
		t.Errorf("watch on a Cluster as the read-only user: exit %d: %q %s", code, out, stderr)
	}
	code, out, stderr = cli(t, ctx, "", "-redis", url, "-cluster", "release", "-force", "-yes", "alpha")
	if code != exitOK {
		t.Fatalf("release on a Cluster: exit %d: %s %s", code, out, stderr)
	}
	select {
	case s := <-w:
		if !strings.Contains(out, "granted  "+s.Token()) {
			t.Errorf("release output %q does not name the new holder %s", out, s.Token())
		}
		s.Release(ctx)
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not granted after a forced release on a Cluster (SPUBLISH)")
	}
	time.Sleep(leaseTTL) // the heartbeat renews the others past their TTL
	for _, s := range leases[1:] {
		if s.Err() != nil {
			t.Errorf("lease of %s under the ACL rule on a Cluster: %v", s.Name(), s.Err())
		}
	}
}

// The README's read-only rule is enough for inspect, list and watch, and
// refuses release.
func TestReadOnlyACLRule(t *testing.T) {
	srv := redistest.Start(t)
	srv.SetUser(t, redistest.DocACLRule(t, "../../README.md", "fairlock-ops"))
	ctx := withTimeout(t, 20*time.Second)
	held := acquire(t, newLocker(t, srv.Client(t)), "ro")
	queue(t, ctx, newLocker(t, srv.Client(t)), "ro")
	url := "redis://fairlock-ops:ops-secret@" + srv.Addr
	for _, args := range [][]string{{"inspect", "ro"}, {"inspect", "-json", "ro"}, {"list"}, {"watch", "-every", "50ms", "-count", "2", "ro"}} {
		code, out, stderr := cli(t, ctx, "", append([]string{"-redis", url}, args...)...)
		if code != exitOK || !strings.Contains(out, "ro") {
			t.Errorf("%q as the read-only user: exit %d: %s %s", args, code, out, stderr)
		}
	}
	code, _, stderr := cli(t, ctx, "", "-redis", url, "release", "-force", "-yes", "ro")
	if code != exitError || !strings.Contains(stderr, "NOPERM") || held.Err() != nil {
		t.Errorf("release as the read-only user: exit %d: %s (lease: %v)", code, stderr, held.Err())
	}
}
