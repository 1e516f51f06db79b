package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/lockjson"
	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

const (
	leaseTTL  = time.Second
	waiterTTL = 600 * time.Millisecond
)

// asMain makes the test binary run the command itself, as a subprocess:
// what a user sees on stderr includes what go-redis logs there.
const asMain = "FAIRLOCK_TEST_AS_MAIN"

// TestMain runs the command when asMain is set; else the tests, six at a
// time: most wait on a server of their own starting, not on the CPU (at
// two, the default on 2 cores, the package took 13-17 s of the README
// command, and held one of go test's two build slots meanwhile).
func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		main()
	}
	redistest.DefaultParallel(6)
	os.Exit(m.Run())
}

// cli runs the command in-process and returns its exit code and output.
func cli(t testing.TB, ctx context.Context, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(ctx, args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// binary runs the command as its own process.
func binary(t testing.TB, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asMain+"=1", "REDIS_URL=")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
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

// acquireFn is an acquire of any kind: a mutex's, a semaphore's for some
// permits, a read-write lock's Lock or RLock.
type acquireFn func(ctx context.Context, opts ...fairlock.AcquireOption) (*fairlock.Lease, error)

func mutexOf(l *fairlock.Locker, name string) acquireFn {
	return func(ctx context.Context, opts ...fairlock.AcquireOption) (*fairlock.Lease, error) {
		return l.Acquire(ctx, name, opts...)
	}
}

func permits(s *fairlock.Semaphore, n int) acquireFn {
	return func(ctx context.Context, opts ...fairlock.AcquireOption) (*fairlock.Lease, error) {
		return s.Acquire(ctx, n, opts...)
	}
}

func semaphore(t testing.TB, l *fairlock.Locker, name string, capacity int) *fairlock.Semaphore {
	t.Helper()
	s, err := l.Semaphore(name, capacity)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func rwmutex(t testing.TB, l *fairlock.Locker, name string) *fairlock.RWMutex {
	t.Helper()
	m, err := l.RWMutex(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func take(t testing.TB, acquire acquireFn, opts ...fairlock.AcquireOption) *fairlock.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := acquire(ctx, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// queue starts an acquire and returns once it is queued; the lease
// arrives on the channel.
func queue(t testing.TB, ctx context.Context, acquire acquireFn, opts ...fairlock.AcquireOption) <-chan *fairlock.Lease {
	t.Helper()
	out := make(chan *fairlock.Lease, 1)
	queued := make(chan struct{})
	go func() {
		var once sync.Once
		opts := append([]fairlock.AcquireOption{fairlock.OnQueued(func(int) { once.Do(func() { close(queued) }) })}, opts...)
		s, err := acquire(ctx, opts...)
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

func granted(t testing.TB, c <-chan *fairlock.Lease) *fairlock.Lease {
	t.Helper()
	select {
	case s := <-c:
		if s == nil {
			t.Fatal("waiter not granted")
		}
		return s
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not granted within 5s")
	}
	return nil
}

func withTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// row returns the fields of the one row of a table in out (an indented
// line) that has token as a field, and the line.
func row(t testing.TB, out, token string) ([]string, string) {
	t.Helper()
	var found []string
	var line string
	for l := range strings.Lines(out) {
		if f := strings.Fields(l); strings.HasPrefix(l, "  ") && slices.Contains(f, token) {
			if found != nil {
				t.Errorf("%s is on two lines of\n%s", token, out)
			}
			found, line = f, strings.TrimRight(l, "\n")
		}
	}
	if found == nil {
		t.Errorf("no line for %s in\n%s", token, out)
		return make([]string, 8), ""
	}
	return found, line
}

// hasRow tells whether out has a line of these fields, however spaced.
func hasRow(out string, fields ...string) bool {
	for l := range strings.Lines(out) {
		if slices.Equal(strings.Fields(l), fields) {
			return true
		}
	}
	return false
}

// wantFields checks that fields, from index from on, are want; "" in want
// matches anything.
func wantFields(t testing.TB, line string, fields []string, from int, want ...string) {
	t.Helper()
	for i, w := range want {
		if w != "" && (from+i >= len(fields) || fields[from+i] != w) {
			t.Errorf("line %q: field %d is not %q", line, from+i, w)
		}
	}
}

// checkSchema checks a LOCK object of the -json output: exactly the
// documented fields, of the documented types, and arrays, never null.
func checkSchema(t testing.TB, lock map[string]any) {
	t.Helper()
	fields := func(what string, obj map[string]any, want map[string]string) {
		t.Helper()
		if len(obj) != len(want) {
			t.Errorf("%s has fields %v, want %v", what, keys(obj), keys(want))
		}
		for f, typ := range want {
			v, ok := obj[f]
			var got string
			switch v.(type) {
			case string:
				got = "string"
			case float64:
				got = "number"
			case []any:
				got = "array"
			}
			if !ok || got != typ {
				t.Errorf("%s: %q is %#v, want a %s", what, f, v, typ)
			}
		}
	}
	fields("lock", lock, map[string]string{"name": "string", "kind": "string", "capacity": "number", "in_use": "number", "fence": "number",
		"queued": "number", "holders": "array", "waiters": "array"})
	holders, _ := lock["holders"].([]any)
	for _, h := range holders {
		h, _ := h.(map[string]any)
		fields("holder", h, map[string]string{"token": "string", "lock": "string", "permits": "number", "fence": "number",
			"ttl_ms": "number", "metadata": "string", "group": "string", "weight": "number", "priority": "number", "multi": "string"})
	}
	waiters, _ := lock["waiters"].([]any)
	for _, w := range waiters {
		w, _ := w.(map[string]any)
		fields("waiter", w, map[string]string{"token": "string", "lock": "string", "permits": "number", "position": "number",
			"ttl_ms": "number", "waited_ms": "number", "metadata": "string", "group": "string", "weight": "number", "priority": "number", "multi": "string"})
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// inspectJSONOf runs inspect -json and decodes it, checking the schema.
func inspectJSONOf(t testing.TB, ctx context.Context, args ...string) inspectJSON {
	t.Helper()
	code, out, stderr := cli(t, ctx, "", append(args[:len(args)-1:len(args)-1], "inspect", "-json", args[len(args)-1])...)
	if code != exitOK {
		t.Fatalf("inspect -json: exit %d: %s", code, stderr)
	}
	t.Logf("inspect -json: %s", out)
	var raw map[string]any
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("inspect -json printed %q: %v", out, err)
	}
	if len(raw) != 2 {
		t.Errorf("inspect -json has fields %v, want name and locks", keys(raw))
	}
	locks, ok := raw["locks"].([]any)
	if _, isName := raw["name"].(string); !ok || !isName {
		t.Errorf("inspect -json: %s", out)
	}
	for _, lk := range locks {
		lk, _ := lk.(map[string]any)
		checkSchema(t, lk)
	}
	var got inspectJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestHelpListsTheCommands(t *testing.T) {
	code, _, stderr := cli(t, context.Background(), "", "-h")
	if code != exitOK {
		t.Errorf("-h exit code %d", code)
	}
	t.Logf("-h:\n%s", stderr)
	for _, c := range order {
		if !strings.Contains(stderr, "\n  "+c) {
			t.Errorf("-h does not list %s:\n%s", c, stderr)
		}
	}
	for _, want := range []string{"-kind K", "-token T | -all", "inspect [-kind K] [-json] NAME", "list [-json]"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("-h lacks %q", want)
		}
	}
	for _, args := range [][]string{{}, {"frobnicate"}, {"inspect"}, {"inspect", "a", "b"}, {"list", "x"},
		{"inspect", "-kind", "read", "x"}, {"-redis", "redis://127.0.0.1:1", "release", "x"},
		{"-redis", "redis://127.0.0.1:1", "release", "-force", "-token", "t", "-all", "x"}} {
		if code, _, _ := cli(t, context.Background(), "", args...); code != exitUsage {
			t.Errorf("%q: exit code %d, want %d", args, code, exitUsage)
		}
	}
	t.Setenv("REDIS_URL", "")
	if code, _, stderr := cli(t, context.Background(), "", "list"); code != exitUsage || !strings.Contains(stderr, "REDIS_URL") {
		t.Errorf("no Redis given: exit %d, %s", code, stderr)
	}
}

func TestInspectMutex(t *testing.T) {
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	url := "redis://" + srv.Addr
	held := take(t, mutexOf(newLocker(t, srv.Client(t)), "job:7"), fairlock.WithMetadata("host a, pid 7"))
	w1 := queue(t, ctx, mutexOf(newLocker(t, srv.Client(t)), "job:7"), fairlock.WithMetadata("host b"))
	w2 := queue(t, ctx, mutexOf(newLocker(t, srv.Client(t)), "job:7"))

	code, out, stderr := cli(t, ctx, "", "-redis", url, "inspect", "job:7")
	if code != exitOK {
		t.Fatalf("inspect: exit %d: %s", code, stderr)
	}
	t.Logf("inspect:\n%s", out)
	for _, want := range []string{"mutex job:7\n", "  held, last fence ", "  holders  1\n", "  waiters  2\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q", want)
		}
	}
	if !hasRow(out, "TOKEN", "EXPIRES", "IN", "METADATA") || !hasRow(out, "POS", "TOKEN", "EXPIRES", "IN", "METADATA") {
		t.Errorf("inspect output lacks the tables' heads")
	}
	if strings.Contains(out, "semaphore") || strings.Contains(out, "rwmutex") || strings.Contains(out, "GROUP") {
		t.Errorf("inspect of a mutex shows other kinds, or groups")
	}
	f, line := row(t, out, held.Token())
	wantFields(t, line, f, 0, held.Token(), "")
	if !strings.HasSuffix(line, `  "host a, pid 7"`) {
		t.Errorf("holder line %q lacks its metadata", line)
	}

	t.Setenv("REDIS_URL", url) // the URL from the environment this time
	got := inspectJSONOf(t, ctx, "job:7")
	if got.Name != "job:7" || len(got.Locks) != 1 {
		t.Fatalf("inspect -json: %+v", got)
	}
	lk := got.Locks[0]
	// A mutex's holder's fence is the latest drawn: at least its own.
	if lk.Name != "job:7" || lk.Kind != "mutex" || lk.Capacity != 1 || lk.InUse != 1 || lk.Fence < held.Fence() || lk.Queued != 2 ||
		len(lk.Holders) != 1 || len(lk.Waiters) != 2 {
		t.Fatalf("inspect -json: %+v", lk)
	}
	h := lk.Holders[0]
	if h.Token != held.Token() || h.Lock != "mutex" || h.Permits != 1 || h.Fence != lk.Fence || h.Metadata != "host a, pid 7" ||
		h.Group != "" || h.TTLMs <= 0 || h.TTLMs > leaseTTL.Milliseconds() {
		t.Errorf("inspect -json holder: %+v", h)
	}
	if lk.Waiters[0].Metadata != "host b" || lk.Waiters[1].Metadata != "" {
		t.Errorf("inspect -json waiters' metadata: %+v", lk.Waiters)
	}
	for i, w := range lk.Waiters {
		if w.Position != i+1 || w.TTLMs <= 0 || w.TTLMs > waiterTTL.Milliseconds() || w.Token == "" || w.Lock != "mutex" || w.Permits != 1 {
			t.Errorf("waiter %d: %+v", i, w)
		}
		f, line := row(t, out, w.Token)
		wantFields(t, line, f, 0, strconv.Itoa(i+1), w.Token)
	}
	held.Release(ctx)
	first := granted(t, w1)
	if first.Token() != lk.Waiters[0].Token {
		t.Errorf("granted %s first, inspect listed %s", first.Token(), lk.Waiters[0].Token)
	}
	first.Release(ctx)
	last := granted(t, w2)
	last.Release(ctx)

	// Nothing in use: said so, with the mutex's last fence.
	code, out, _ = cli(t, ctx, "", "inspect", "job:7")
	if want := fmt.Sprintf("job:7 is not in use: no kind of lock of that name has a holder or a waiter (the mutex's last fence is %d)\n", last.Fence()); code != exitOK || out != want {
		t.Errorf("inspect of a free lock: exit %d: %q, want %q", code, out, want)
	}
	got = inspectJSONOf(t, ctx, "job:7")
	if len(got.Locks) != 1 || got.Locks[0].Kind != "mutex" || got.Locks[0].Fence != last.Fence() || got.Locks[0].InUse != 0 {
		t.Errorf("inspect -json of a free lock: %+v", got)
	}
	code, out, _ = cli(t, ctx, "", "inspect", "-json", "job:7")
	if !strings.Contains(out, `"holders":[]`) || !strings.Contains(out, `"waiters":[]`) {
		t.Errorf("inspect -json of a free lock: exit %d: %s", code, out)
	}
	// -kind shows that kind, idle.
	code, out, _ = cli(t, ctx, "", "inspect", "-kind", "semaphore", "job:7")
	if code != exitOK || out != "semaphore job:7\n  idle (the next Acquire sets the capacity), last fence 0\n  holders  none\n  waiters  none\n" {
		t.Errorf("inspect -kind semaphore of an idle semaphore: exit %d: %q", code, out)
	}
}

// Waiters of a priority above 0 show it, in a column of their own and in
// the JSON, and are listed first.
func TestInspectPriority(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	url := "redis://" + srv.Addr
	take(t, mutexOf(newLocker(t, srv.Client(t)), "render"))
	queue(t, ctx, mutexOf(newLocker(t, srv.Client(t)), "render"))
	queue(t, ctx, mutexOf(newLocker(t, srv.Client(t)), "render"), fairlock.WithPriority(7))
	code, out, stderr := cli(t, ctx, "", "-redis", url, "inspect", "render")
	if code != exitOK {
		t.Fatalf("inspect: exit %d: %s", code, stderr)
	}
	t.Logf("inspect:\n%s", out)
	if !hasRow(out, "POS", "TOKEN", "EXPIRES", "IN", "PRIORITY", "METADATA") {
		t.Errorf("inspect output lacks the waiters' head with PRIORITY")
	}
	lk := inspectJSONOf(t, ctx, "-redis", url, "render").Locks[0]
	if len(lk.Waiters) != 2 || lk.Waiters[0].Priority != 7 || lk.Waiters[1].Priority != 0 || lk.Holders[0].Priority != 0 {
		t.Fatalf("inspect -json: %+v", lk)
	}
	f, line := row(t, out, lk.Waiters[0].Token)
	wantFields(t, line, f, 0, "1", lk.Waiters[0].Token, "", "7", "-")
}

// A MultiMutex request waiting in two queues shows as one in both: the
// same label in the MULTI column and the JSON's "multi"; a single
// request's is "-" and "".
func TestInspectMultiMutex(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	url := "redis://" + srv.Addr
	take(t, mutexOf(newLocker(t, srv.Client(t)), "from"))
	take(t, mutexOf(newLocker(t, srv.Client(t)), "to"))
	m, err := newLocker(t, srv.Client(t)).MultiMutex("from", "to")
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan int, 2)
	go m.Acquire(ctx, fairlock.OnQueued(func(int) { queued <- 1 })) //nolint:errcheck // ends with ctx
	for range 2 {
		<-queued
	}
	label := map[string]string{}
	for _, name := range []string{"from", "to"} {
		code, out, stderr := cli(t, ctx, "", "-redis", url, "inspect", name)
		if code != exitOK {
			t.Fatalf("inspect: exit %d: %s", code, stderr)
		}
		t.Logf("inspect:\n%s", out)
		lk := inspectJSONOf(t, ctx, "-redis", url, name).Locks[0]
		if len(lk.Waiters) != 1 || lk.Waiters[0].Multi == "" || lk.Holders[0].Multi != "" {
			t.Fatalf("inspect -json %s: %+v", name, lk)
		}
		label[name] = lk.Waiters[0].Multi
		if !hasRow(out, "POS", "TOKEN", "EXPIRES", "IN", "MULTI", "METADATA") {
			t.Errorf("inspect output lacks the waiters' head with MULTI")
		}
		f, line := row(t, out, lk.Waiters[0].Token)
		wantFields(t, line, f, 0, "1", lk.Waiters[0].Token, "", label[name], "-")
	}
	if label["from"] != label["to"] {
		t.Errorf("the request's parts are labelled %q and %q, want one label", label["from"], label["to"])
	}
}

// A semaphore with two holders, one of two permits, with groups and
// metadata, and two waiters; the mutex of the same name beside it.
func TestInspectSemaphore(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	url := "redis://" + srv.Addr
	sem := func() *fairlock.Semaphore { return semaphore(t, newLocker(t, srv.Client(t)), "jobs", 3) }
	a := take(t, permits(sem(), 2), fairlock.WithMetadata("host a"), fairlock.WithGroup("tenant-a"))
	b := take(t, permits(sem(), 1), fairlock.WithMetadata("host b"))
	// tenant-a's latest request weighs it 3: its holder shows it too.
	c := queue(t, ctx, permits(sem(), 2), fairlock.WithMetadata("job 12"), fairlock.WithGroup("tenant-a"), fairlock.WithGroupWeight(3))
	queue(t, ctx, permits(sem(), 1))

	code, out, stderr := cli(t, ctx, "", "-redis", url, "inspect", "jobs")
	if code != exitOK {
		t.Fatalf("inspect: exit %d: %s", code, stderr)
	}
	t.Logf("inspect:\n%s", out)
	for _, want := range []string{"semaphore jobs\n", fmt.Sprintf("  3 of 3 permits in use, last fence %d\n", max(a.Fence(), b.Fence())),
		"  holders  2\n", "  waiters  2\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q", want)
		}
	}
	if !hasRow(out, "TOKEN", "PERMITS", "FENCE", "EXPIRES", "IN", "GROUP", "METADATA") ||
		!hasRow(out, "POS", "TOKEN", "PERMITS", "EXPIRES", "IN", "GROUP", "METADATA") {
		t.Errorf("inspect output lacks the tables' heads")
	}
	f, line := row(t, out, a.Token())
	wantFields(t, line, f, 0, a.Token(), "2", strconv.FormatInt(a.Fence(), 10), "", "tenant-a", "(weight", "3)", `"host`, `a"`)
	f, line = row(t, out, b.Token())
	wantFields(t, line, f, 0, b.Token(), "1", strconv.FormatInt(b.Fence(), 10), "", "-", `"host`, `b"`)
	if strings.Contains(out, "mutex") {
		t.Errorf("inspect shows an idle mutex:\n%s", out)
	}

	got := inspectJSONOf(t, ctx, "-redis", url, "jobs")
	if len(got.Locks) != 1 {
		t.Fatalf("inspect -json: %+v", got)
	}
	lk := got.Locks[0]
	if lk.Kind != "semaphore" || lk.Capacity != 3 || lk.InUse != 3 || lk.Queued != 2 || len(lk.Holders) != 2 || len(lk.Waiters) != 2 {
		t.Fatalf("inspect -json: %+v", lk)
	}
	want := map[string]lockjson.Holder{
		a.Token(): {Token: a.Token(), Lock: "semaphore", Permits: 2, Fence: a.Fence(), Metadata: "host a", Group: "tenant-a", Weight: 3},
		b.Token(): {Token: b.Token(), Lock: "semaphore", Permits: 1, Fence: b.Fence(), Metadata: "host b", Weight: 1},
	}
	for _, h := range lk.Holders {
		if h.TTLMs <= 0 || h.TTLMs > leaseTTL.Milliseconds() {
			t.Errorf("holder %s: ttl_ms %d", h.Token, h.TTLMs)
		}
		h.TTLMs = 0
		if h != want[h.Token] {
			t.Errorf("holder %+v, want %+v", h, want[h.Token])
		}
	}
	w0, w1 := lk.Waiters[0], lk.Waiters[1]
	if w0.Position != 1 || w0.Permits != 2 || w0.Group != "tenant-a" || w0.Weight != 3 || w0.Metadata != "job 12" || w0.Lock != "semaphore" ||
		w1.Position != 2 || w1.Permits != 1 || w1.Group != "" || w1.Weight != 1 || w1.Metadata != "" || w0.TTLMs <= 0 || w1.TTLMs > waiterTTL.Milliseconds() {
		t.Errorf("inspect -json waiters: %+v", lk.Waiters)
	}
	f, line = row(t, out, w0.Token)
	wantFields(t, line, f, 0, "1", w0.Token, "2", "", "tenant-a", "(weight", "3)", `"job`, `12"`)
	f, line = row(t, out, w1.Token)
	wantFields(t, line, f, 0, "2", w1.Token, "1", "", "-", "-")

	// The mutex of the same name, in use too: two sections, -kind picks.
	m := take(t, mutexOf(newLocker(t, srv.Client(t)), "jobs"))
	code, out, _ = cli(t, ctx, "", "-redis", url, "inspect", "jobs")
	if code != exitOK || !strings.HasPrefix(out, "mutex jobs\n") || !strings.Contains(out, "\n\nsemaphore jobs\n") {
		t.Errorf("inspect of a mutex and a semaphore: exit %d:\n%s", code, out)
	}
	got = inspectJSONOf(t, ctx, "-redis", url, "jobs")
	if len(got.Locks) != 2 || got.Locks[0].Kind != "mutex" || got.Locks[0].Holders[0].Token != m.Token() || got.Locks[1].Kind != "semaphore" {
		t.Errorf("inspect -json of a mutex and a semaphore: %+v", got)
	}
	code, out, _ = cli(t, ctx, "", "-redis", url, "inspect", "-kind", "semaphore", "jobs")
	if code != exitOK || !strings.HasPrefix(out, "semaphore jobs\n") || strings.Contains(out, "mutex") {
		t.Errorf("inspect -kind semaphore: exit %d:\n%s", code, out)
	}
	a.Release(ctx)
	b.Release(ctx)
	granted(t, c).Release(ctx)
}

// A read-write lock with two readers, a writer waiting, and a reader
// behind it.
func TestInspectRWMutex(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	url := "redis://" + srv.Addr
	rw := func() *fairlock.RWMutex { return rwmutex(t, newLocker(t, srv.Client(t)), "db") }
	r1 := take(t, rw().RLock, fairlock.WithMetadata("report 1"))
	r2 := take(t, rw().RLock)
	w := queue(t, ctx, rw().Lock, fairlock.WithMetadata("migrate"))
	queue(t, ctx, rw().RLock)

	code, out, stderr := cli(t, ctx, "", "-redis", url, "inspect", "db")
	if code != exitOK {
		t.Fatalf("inspect: exit %d: %s", code, stderr)
	}
	t.Logf("inspect:\n%s", out)
	for _, want := range []string{"rwmutex db\n", fmt.Sprintf("  held by 2 readers, last fence %d\n", max(r1.Fence(), r2.Fence())),
		"  holders  2\n", "  waiters  2\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q", want)
		}
	}
	if !hasRow(out, "TOKEN", "LOCK", "FENCE", "EXPIRES", "IN", "METADATA") || !hasRow(out, "POS", "TOKEN", "LOCK", "EXPIRES", "IN", "METADATA") {
		t.Errorf("inspect output lacks the tables' heads")
	}
	f, line := row(t, out, r1.Token())
	wantFields(t, line, f, 0, r1.Token(), "read", strconv.FormatInt(r1.Fence(), 10), "", `"report`, `1"`)
	f, line = row(t, out, r2.Token())
	wantFields(t, line, f, 0, r2.Token(), "read", strconv.FormatInt(r2.Fence(), 10), "", "-")

	got := inspectJSONOf(t, ctx, "-redis", url, "db")
	if len(got.Locks) != 1 {
		t.Fatalf("inspect -json: %+v", got)
	}
	lk := got.Locks[0]
	if lk.Kind != "rwmutex" || lk.InUse != 2 || lk.Capacity != fairlock.MaxCapacity || lk.Queued != 2 || len(lk.Holders) != 2 || len(lk.Waiters) != 2 {
		t.Fatalf("inspect -json: %+v", lk)
	}
	for _, h := range lk.Holders {
		if h.Lock != "read" || h.Permits != 1 || (h.Token != r1.Token() && h.Token != r2.Token()) {
			t.Errorf("holder %+v", h)
		}
	}
	if ws := lk.Waiters; ws[0].Lock != "write" || ws[0].Metadata != "migrate" || ws[0].Position != 1 || ws[1].Lock != "read" || ws[1].Position != 2 {
		t.Errorf("waiters %+v", ws)
	}
	f, line = row(t, out, lk.Waiters[0].Token)
	wantFields(t, line, f, 0, "1", lk.Waiters[0].Token, "write", "", `"migrate"`)
	r1.Release(ctx)
	r2.Release(ctx)
	writer := granted(t, w)
	code, out, _ = cli(t, ctx, "", "-redis", url, "inspect", "db")
	if code != exitOK || !strings.Contains(out, fmt.Sprintf("  held by a writer, last fence %d\n", writer.Fence())) {
		t.Errorf("inspect with a writer: exit %d:\n%s", code, out)
	}
	writer.Release(ctx)
}

// The forced hand-off of a mutex from the command line: confirmation,
// output, and what the old holder sees.
func TestReleaseForce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	url := "redis://" + srv.Addr
	old := newLocker(t, srv.Client(t))
	held := take(t, mutexOf(old, "stuck"))
	next := queue(t, ctx, mutexOf(newLocker(t, srv.Client(t)), "stuck"))

	if code, _, stderr := cli(t, ctx, "", "-redis", url, "release", "stuck"); code != exitUsage || !strings.Contains(stderr, "-force") {
		t.Errorf("release without -force: exit %d: %s", code, stderr)
	}
	code, out, stderr := cli(t, ctx, "n\n", "-redis", url, "release", "-force", "stuck")
	if code != exitError || !strings.Contains(out, "End this lease? [y/N]") || !strings.Contains(stderr, "nothing changed") {
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
	s := granted(t, next)
	for _, want := range []string{"ending   the mutex stuck's holder\n", "\n  " + held.Token() + "  ", "the lock passes to " + s.Token() + "\n",
		"[y/N] \nended    " + held.Token() + " (fence at most ", fmt.Sprintf("granted  %s (fence %d)\n", s.Token(), s.Fence())} {
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
	if code != exitError || stderr != "fairlock release: no lock called stuck is held: nothing to release\n" {
		t.Errorf("release of a free lock: exit %d: %s %q", code, out, stderr)
	}
	take(t, mutexOf(old, "stuck"))
	code, out, stderr = cli(t, ctx, "", "-redis", url, "release", "-force", "-yes", "stuck")
	if code != exitOK || !strings.Contains(out, "granted  nobody: nobody waits\n") || strings.Contains(out, "[y/N]") {
		t.Errorf("release -yes with nobody waiting: exit %d: %s %s", code, out, stderr)
	}
}

// release -force on a semaphore of two holders: refused without -token,
// then -token ends that holder alone and grants the waiter that now fits.
func TestReleaseForceSemaphoreToken(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	url := "redis://" + srv.Addr
	la, lb := newLocker(t, srv.Client(t)), newLocker(t, srv.Client(t))
	a := take(t, permits(semaphore(t, la, "pool", 3), 2), fairlock.WithMetadata("host a"), fairlock.WithGroup("tenant-a"))
	b := take(t, permits(semaphore(t, lb, "pool", 3), 1), fairlock.WithMetadata("host b"))
	next := queue(t, ctx, permits(semaphore(t, newLocker(t, srv.Client(t)), "pool", 3), 2), fairlock.WithMetadata("job 12"))

	code, out, stderr := cli(t, ctx, "", "-redis", url, "release", "-force", "-yes", "pool")
	t.Logf("release without -token:\n%s%s", out, stderr)
	if code != exitUsage || !strings.Contains(stderr, "the semaphore pool has 2 holders: pass -token T to end one of them, or -all to end every one") ||
		!strings.Contains(out, a.Token()) || !strings.Contains(out, b.Token()) || strings.Contains(out, "ended") {
		t.Errorf("release of two holders without -token: exit %d: %s %s", code, out, stderr)
	}
	if code, _, stderr := cli(t, ctx, "", "-redis", url, "release", "-force", "-yes", "-token", "nobody:1", "pool"); code != exitError ||
		stderr != "fairlock release: nobody:1 holds no lock called pool: nothing to release\n" {
		t.Errorf("release -token of no holder: exit %d: %q", code, stderr)
	}
	if a.Err() != nil || b.Err() != nil {
		t.Fatalf("a refused release ended a lease: %v, %v", a.Err(), b.Err())
	}

	code, out, stderr = cli(t, ctx, "y\n", "-redis", url, "release", "-force", "-token", a.Token(), "pool")
	if code != exitOK {
		t.Fatalf("release -token: exit %d: %s %s", code, out, stderr)
	}
	t.Logf("release -force -token:\n%s", out)
	s := granted(t, next)
	for _, want := range []string{"ending   1 of the 2 holders of the semaphore pool\n", "End this lease? [y/N]",
		"then the waiters that fit are granted, in queue order; 1 waiting, first " + s.Token() + `, 2 permits  "job 12"` + "\n",
		fmt.Sprintf("ended    %s (fence %d)\n", a.Token(), a.Fence()), fmt.Sprintf("granted  %s (fence %d)\n", s.Token(), s.Fence())} {
		if !strings.Contains(out, want) {
			t.Errorf("release output lacks %q", want)
		}
	}
	f, line := row(t, out, a.Token())
	wantFields(t, line, f, 0, a.Token(), "2", strconv.FormatInt(a.Fence(), 10), "", "tenant-a", `"host`, `a"`)
	if strings.Contains(out, b.Token()) || strings.Count(out, "ended ") != 1 {
		t.Errorf("release -token names another holder:\n%s", out)
	}
	select {
	case <-a.Done():
	case <-time.After(la.Heartbeat() + 500*time.Millisecond):
		t.Fatal("ended holder not told within a heartbeat")
	}
	if !errors.Is(a.Err(), fairlock.ErrLost) || b.Err() != nil {
		t.Errorf("after release -token: ended lease %v (want ErrLost), other lease %v", a.Err(), b.Err())
	}
	code, _, stderr = cli(t, ctx, "", "-redis", url, "release", "-force", "-yes", "-kind", "semaphore", "-token", a.Token(), "pool")
	if code != exitError || !strings.Contains(stderr, a.Token()+" holds no semaphore called pool: nothing to release") {
		t.Errorf("release of an ended token: exit %d: %s", code, stderr)
	}
	s.Release(ctx)
	b.Release(ctx)
}

// release -force -all on a read-write lock ends all its readers and grants
// the writer; with the mutex of that name held too, -kind is needed.
func TestReleaseForceAllReaders(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	url := "redis://" + srv.Addr
	rw := func() *fairlock.RWMutex { return rwmutex(t, newLocker(t, srv.Client(t)), "db") }
	r1, r2 := take(t, rw().RLock), take(t, rw().RLock, fairlock.WithMetadata("report"))
	w := queue(t, ctx, rw().Lock)
	m := take(t, mutexOf(newLocker(t, srv.Client(t)), "db"))

	code, out, stderr := cli(t, ctx, "", "-redis", url, "release", "-force", "-yes", "-all", "db")
	if code != exitUsage || !strings.Contains(stderr, "db is held as a mutex and as a rwmutex, independent locks: pass -kind mutex or -kind rwmutex to say which") {
		t.Errorf("release of two kinds without -kind: exit %d: %s %s", code, out, stderr)
	}
	code, out, stderr = cli(t, ctx, "yes\n", "-redis", url, "release", "-force", "-all", "-kind", "rwmutex", "db")
	if code != exitOK {
		t.Fatalf("release -all: exit %d: %s %s", code, out, stderr)
	}
	t.Logf("release -force -all:\n%s", out)
	s := granted(t, w)
	for _, want := range []string{"ending   all 2 holders of the rwmutex db\n", "End these 2 leases? [y/N]",
		fmt.Sprintf("ended    %s (fence %d)\n", r1.Token(), r1.Fence()), fmt.Sprintf("ended    %s (fence %d)\n", r2.Token(), r2.Fence()),
		fmt.Sprintf("granted  %s (fence %d)\n", s.Token(), s.Fence()), ", first " + s.Token() + ", write\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("release output lacks %q", want)
		}
	}
	for _, r := range []*fairlock.Lease{r1, r2} {
		select {
		case <-r.Done():
		case <-time.After(2 * time.Second):
			t.Fatal("ended reader not told")
		}
	}
	if m.Err() != nil {
		t.Errorf("release -kind rwmutex ended the mutex: %v", m.Err())
	}
	s.Release(ctx)
}

func TestList(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	url := "redis://" + srv.Addr
	l := newLocker(t, srv.Client(t))
	for _, name := range []string{"b{1}", "a b", "c%"} {
		take(t, mutexOf(l, name))
	}
	take(t, mutexOf(l, "gone")).Release(ctx)
	take(t, permits(semaphore(t, l, "b{1}", 2), 2), fairlock.WithGroup("tenant-a"))
	queue(t, ctx, permits(semaphore(t, newLocker(t, srv.Client(t)), "b{1}", 2), 1))
	take(t, rwmutex(t, l, "d").RLock)
	take(t, rwmutex(t, newLocker(t, srv.Client(t)), "d").RLock)

	code, out, stderr := cli(t, ctx, "", "-redis", url, "list")
	want := "" +
		"KIND       NAME   HOLDERS  WAITERS\n" +
		"mutex      \"a b\"  1        0\n" +
		"mutex      b{1}   1        0\n" +
		"semaphore  b{1}   1        1\n" +
		"mutex      c%     1        0\n" +
		"rwmutex    d      2        0\n"
	if code != exitOK || out != want {
		t.Errorf("list: exit %d:\n%s(want\n%s) %s", code, out, want, stderr)
	}
	code, out, stderr = cli(t, ctx, "", "-redis", url, "list", "-json")
	var raw struct{ Locks []map[string]any }
	if code != exitOK || json.Unmarshal([]byte(out), &raw) != nil || len(raw.Locks) != 5 {
		t.Fatalf("list -json: exit %d: %s %s", code, out, stderr)
	}
	for _, lk := range raw.Locks {
		checkSchema(t, lk)
	}
	var got listJSON
	json.Unmarshal([]byte(out), &got)
	if sem := got.Locks[2]; sem.Name != "b{1}" || sem.Kind != "semaphore" || sem.InUse != 2 || sem.Capacity != 2 ||
		len(sem.Holders) != 1 || sem.Holders[0].Group != "tenant-a" || len(sem.Waiters) != 1 {
		t.Errorf("list -json's semaphore: %+v", sem)
	}
	if code, out, _ := cli(t, ctx, "", "-redis", url, "-prefix", "other", "list"); code != exitOK || out != "" {
		t.Errorf("list under another prefix: exit %d: %q", code, out)
	}
	if code, out, _ := cli(t, ctx, "", "-redis", url, "-prefix", "other", "list", "-json"); code != exitOK || out != "{\"locks\":[]}\n" {
		t.Errorf("list -json under another prefix: exit %d: %q", code, out)
	}
}

// watch marks a semaphore's new waiter, its grant and the lease that
// ended; a mutex's the same way.
func TestWatchMarksGrantsAndNewWaiters(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	sem := func() *fairlock.Semaphore { return semaphore(t, newLocker(t, srv.Client(t)), "w", 2) }
	held := take(t, permits(sem(), 2))
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
	w := queue(t, ctx, permits(sem(), 1), fairlock.WithMetadata("job 12"), fairlock.WithGroup("tenant-a"))
	time.Sleep(250 * time.Millisecond)
	held.Release(ctx)
	s := granted(t, w)
	r := <-done
	t.Logf("watch:\n%s", r.out)
	if r.code != exitOK {
		t.Fatalf("watch: exit %d: %s", r.code, r.stderr)
	}
	if n := strings.Count(r.out, "--- "); n != 8 {
		t.Errorf("%d readings, want 8", n)
	}
	for _, want := range []string{
		"\n+ semaphore: " + s.Token() + ` queued at position 1, 1 permit, group tenant-a  "job 12"` + "\n",
		fmt.Sprintf("\n* semaphore: granted to %s, 1 permit, fence %d, group tenant-a  \"job 12\"\n", s.Token(), s.Fence()),
		fmt.Sprintf("\n- semaphore: %s ended (released, expired or forced), 2 permits, fence %d\n", held.Token(), held.Fence()),
		"semaphore w\n  2 of 2 permits in use", "semaphore w\n  1 of 2 permits in use",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("watch output lacks %q", want)
		}
	}
	if strings.Count(r.out, "* semaphore: granted") != 1 || strings.Count(r.out, "+ semaphore:") != 1 {
		t.Errorf("watch marks a grant or a waiter twice")
	}

	// A mutex of that name comes into use: its section and marks appear.
	m := take(t, mutexOf(newLocker(t, srv.Client(t)), "w"))
	go func() {
		code, out, stderr := cli(t, ctx, "", "-redis", "redis://"+srv.Addr, "watch", "-every", "100ms", "-count", "6", "w")
		done <- result{code, out, stderr}
	}()
	time.Sleep(150 * time.Millisecond)
	mw := queue(t, ctx, mutexOf(newLocker(t, srv.Client(t)), "w"))
	m.Release(ctx)
	ms := granted(t, mw)
	r = <-done
	if !strings.Contains(r.out, "mutex w\n") || !strings.Contains(r.out, "\n* mutex: granted to "+ms.Token()+", fence at most ") {
		t.Errorf("watch of a mutex and a semaphore: exit %d:\n%s", r.code, r.out)
	}
	ms.Release(ctx)

	// Until interrupted: the context's end is a normal exit.
	stop, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if code, _, stderr := cli(t, stop, "", "-redis", "redis://"+srv.Addr, "watch", "-every", "50ms", "w"); code != exitOK {
		t.Errorf("interrupted watch: exit %d: %s", code, stderr)
	}
}

// With Redis down the command says so in one line, whatever it was asked,
// and go-redis logs nothing.
func TestRedisDown(t *testing.T) {
	port := redistest.FreePort(t) // nobody listens there
	url := fmt.Sprintf("redis://127.0.0.1:%d", port)
	want := fmt.Sprintf("cannot connect to Redis at 127.0.0.1:%d: connection refused", port)
	for _, args := range [][]string{
		{"inspect", "x"},
		{"-cluster=false", "list"},
		{"-cluster", "inspect", "-json", "x"},
		{"-cluster=false", "release", "-force", "-yes", "x"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			code, out, stderr := binary(t, append([]string{"-redis", url}, args...)...)
			if code != exitError || out != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) ||
				strings.Contains(stderr, "redis:") || strings.Contains(stderr, "-cluster") {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and one line with %q", code, out, stderr, want)
			}
		})
	}
}

// The -cluster hint shows only when the cluster question itself is
// refused, which -cluster=false avoids.
func TestClusterHint(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	srv.SetUser(t, "ACL SETUSER noinfo on >pw ~* &* +@all -info")
	ctx := withTimeout(t, 20*time.Second)
	url := "redis://noinfo:pw@" + srv.Addr
	code, _, stderr := cli(t, ctx, "", "-redis", url, "list")
	if code != exitError || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "NOPERM") || !strings.Contains(stderr, "pass -cluster or -cluster=false") {
		t.Errorf("INFO refused: exit %d: %q", code, stderr)
	}
	if code, _, stderr := cli(t, ctx, "", "-redis", url, "-cluster=false", "list"); code != exitOK {
		t.Errorf("-cluster=false with INFO refused: exit %d: %s", code, stderr)
	}
	code, _, stderr = cli(t, ctx, "", "-redis", "redis://noinfo:wrong@"+srv.Addr, "list")
	if code != exitError || strings.Count(stderr, "\n") != 1 || strings.Contains(stderr, "-cluster") {
		t.Errorf("wrong password: exit %d: %q", code, stderr)
	}
}

// list, inspect and release on a Redis Cluster, found out from the server
// itself, with the lock users and the read-only user under the ACL rules
// of docs/operations.md.
func TestOnRedisCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a 6-node Redis Cluster")
	}
	c := redistest.StartCluster(t)
	ctx := withTimeout(t, 60*time.Second)
	for _, node := range c.Nodes {
		node.SetUser(t, redistest.DocACLRule(t, "../../docs/operations.md", "fairlock-app"))
		node.SetUser(t, redistest.DocACLRule(t, "../../docs/operations.md", "fairlock-ops"))
	}
	// The lock users run under the rule of docs/operations.md, on a ClusterClient.
	app := &redis.ClusterOptions{Username: "fairlock-app", Password: "app-secret"}
	l := newLocker(t, c.Client(t, app))
	names := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta"}
	var leases []*fairlock.Lease
	for _, name := range names {
		leases = append(leases, take(t, mutexOf(l, name)))
	}
	sa := take(t, permits(semaphore(t, l, "alpha", 2), 1), fairlock.WithGroup("tenant-a"))
	rb := take(t, rwmutex(t, l, "beta").RLock)
	w := queue(t, ctx, mutexOf(newLocker(t, c.Client(t, app)), "alpha"))
	url := "redis://" + c.Addrs[0]
	code, out, stderr := cli(t, ctx, "", "-redis", url, "list")
	want := "" +
		"KIND       NAME     HOLDERS  WAITERS\n" +
		"mutex      alpha    1        1\n" +
		"semaphore  alpha    1        0\n" +
		"mutex      beta     1        0\n" +
		"rwmutex    beta     1        0\n" +
		"mutex      delta    1        0\n" +
		"mutex      epsilon  1        0\n" +
		"mutex      gamma    1        0\n" +
		"mutex      zeta     1        0\n"
	if code != exitOK || out != want {
		t.Fatalf("list on a Cluster: exit %d:\n%s(want\n%s) %s", code, out, want, stderr)
	}
	got := inspectJSONOf(t, ctx, "-redis", url, "alpha")
	if len(got.Locks) != 2 || len(got.Locks[0].Holders) != 1 || len(got.Locks[0].Waiters) != 1 || got.Locks[1].Holders[0].Token != sa.Token() {
		t.Fatalf("inspect on a Cluster: %+v", got)
	}
	holder := got.Locks[0].Holders[0].Token
	ro := "redis://fairlock-ops:ops-secret@" + c.Addrs[1]
	if code, out, stderr := cli(t, ctx, "", "-redis", ro, "list"); code != exitOK || out != want {
		t.Errorf("list on a Cluster as the read-only user: exit %d: %q %s", code, out, stderr)
	}
	if code, out, stderr := cli(t, ctx, "", "-redis", ro, "inspect", "alpha"); code != exitOK || !strings.Contains(out, holder) || !strings.Contains(out, sa.Token()) {
		t.Errorf("inspect on a Cluster as the read-only user: exit %d: %q %s", code, out, stderr)
	}
	if code, out, stderr := cli(t, ctx, "", "-redis", ro, "inspect", "beta"); code != exitOK || !strings.Contains(out, rb.Token()) {
		t.Errorf("inspect of a read-write lock on a Cluster as the read-only user: exit %d: %q %s", code, out, stderr)
	}
	if code, out, stderr := cli(t, ctx, "", "-redis", ro, "watch", "-every", "50ms", "-count", "2", "alpha"); code != exitOK || !strings.Contains(out, holder) {
		t.Errorf("watch on a Cluster as the read-only user: exit %d: %q %s", code, out, stderr)
	}
	code, out, stderr = cli(t, ctx, "", "-redis", url, "-cluster", "release", "-force", "-yes", "-kind", "mutex", "alpha")
	if code != exitOK {
		t.Fatalf("release on a Cluster: exit %d: %s %s", code, out, stderr)
	}
	select {
	case s := <-w:
		if !strings.Contains(out, fmt.Sprintf("granted  %s (fence %d)", s.Token(), s.Fence())) {
			t.Errorf("release output %q does not name the new holder %s", out, s.Token())
		}
		s.Release(ctx)
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not granted after a forced release on a Cluster (SPUBLISH)")
	}
	code, out, stderr = cli(t, ctx, "", "-redis", url, "release", "-force", "-yes", "-token", sa.Token(), "alpha")
	if code != exitOK || !strings.Contains(out, "ended    "+sa.Token()) {
		t.Errorf("release -token of a semaphore on a Cluster: exit %d: %s %s", code, out, stderr)
	}
	time.Sleep(leaseTTL) // the heartbeat renews the others past their TTL
	for _, s := range append(leases[1:], rb) {
		if s.Err() != nil {
			t.Errorf("lease of %s under the ACL rule on a Cluster: %v", s.Name(), s.Err())
		}
	}
}

// The read-only rule of docs/operations.md is enough for inspect, list and
// watch, of every kind, and refuses release.
func TestReadOnlyACLRule(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	srv.SetUser(t, redistest.DocACLRule(t, "../../docs/operations.md", "fairlock-ops"))
	ctx := withTimeout(t, 20*time.Second)
	held := take(t, mutexOf(newLocker(t, srv.Client(t)), "ro"))
	queue(t, ctx, mutexOf(newLocker(t, srv.Client(t)), "ro"))
	sem := take(t, permits(semaphore(t, newLocker(t, srv.Client(t)), "ro", 2), 2), fairlock.WithGroup("tenant-a"), fairlock.WithMetadata("m"))
	queue(t, ctx, permits(semaphore(t, newLocker(t, srv.Client(t)), "ro", 2), 1), fairlock.WithGroup("tenant-b"))
	reader := take(t, rwmutex(t, newLocker(t, srv.Client(t)), "ro").RLock)
	queue(t, ctx, rwmutex(t, newLocker(t, srv.Client(t)), "ro").Lock)
	url := "redis://fairlock-ops:ops-secret@" + srv.Addr
	for _, args := range [][]string{{"inspect", "ro"}, {"inspect", "-json", "ro"}, {"list"}, {"list", "-json"},
		{"watch", "-every", "50ms", "-count", "2", "ro"}} {
		code, out, stderr := cli(t, ctx, "", append([]string{"-redis", url}, args...)...)
		tokens := args[0] != "list" || slices.Contains(args, "-json") // list's text counts holders
		if code != exitOK || !strings.Contains(out, "ro") ||
			tokens && (!strings.Contains(out, held.Token()) || !strings.Contains(out, sem.Token()) || !strings.Contains(out, reader.Token())) {
			t.Errorf("%q as the read-only user: exit %d: %s %s", args, code, out, stderr)
		}
	}
	got := inspectJSONOf(t, ctx, "-redis", url, "ro")
	if len(got.Locks) != 3 || len(got.Locks[0].Waiters) != 1 || len(got.Locks[1].Waiters) != 1 || len(got.Locks[2].Waiters) != 1 {
		t.Errorf("inspect -json as the read-only user: %+v", got)
	}
	code, _, stderr := cli(t, ctx, "", "-redis", url, "release", "-force", "-yes", "-kind", "mutex", "ro")
	if code != exitError || !strings.Contains(stderr, "NOPERM") || strings.Count(stderr, "\n") != 1 || held.Err() != nil {
		t.Errorf("release as the read-only user: exit %d: %s (lease: %v)", code, stderr, held.Err())
	}
}

// Untrusted bytes (metadata, groups, tokens, names) are quoted, never
// printed raw; waiters past those listed are counted.
func TestPrintStateQuotesAndCounts(t *testing.T) {
	t.Parallel()
	st := fairlock.State{Name: "a\tb", Lock: fairlock.LockSemaphore, Capacity: 2, InUse: 1, Fence: 9, Queued: 5,
		Holders: []fairlock.Holder{{Token: "t:1", Permits: 1, Fence: 9, TTL: 1500 * time.Millisecond,
			Metadata: "\x1b[2Jowned\n", Group: "g h"}},
		Waiters: []fairlock.Waiter{{Token: "t\n2", Permits: 2, Position: 1, TTL: time.Second}}}
	var out bytes.Buffer
	printState(&out, st)
	t.Logf("\n%s", out.String())
	for _, want := range []string{`semaphore "a\tb"` + "\n", "  1 of 2 permits in use, last fence 9\n", `  1.5s        "g h"  "\x1b[2Jowned\n"` + "\n",
		`    1    "t\n2"  2        1s          -      -` + "\n", "  waiters  5\n", "    … and 4 more\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out.String(), "\x1b") || strings.Count(out.String(), "\n") != 9 {
		t.Errorf("raw bytes in the output")
	}
}

// An election shows as a lock of its own kind: its leader holds it, its
// candidates wait, in the order they campaigned.
func TestInspectElection(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := withTimeout(t, 20*time.Second)
	url := "redis://" + srv.Addr
	campaign := func(value string) acquireFn {
		e, err := newLocker(t, srv.Client(t)).Election("scheduler")
		if err != nil {
			t.Fatal(err)
		}
		return func(ctx context.Context, opts ...fairlock.AcquireOption) (*fairlock.Lease, error) {
			term, err := e.Campaign(ctx, value, opts...)
			if err != nil {
				return nil, err
			}
			return term.Lease(), nil
		}
	}
	leader := take(t, campaign("a:8080"), fairlock.WithMetadata("host a"))
	next := queue(t, ctx, campaign("b:8080"), fairlock.WithMetadata("host b"))

	code, out, stderr := cli(t, ctx, "", "-redis", url, "inspect", "scheduler")
	if code != exitOK {
		t.Fatalf("inspect: exit %d: %s", code, stderr)
	}
	t.Logf("inspect:\n%s", out)
	for _, want := range []string{"election scheduler\n", "  waiters  1\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q", want)
		}
	}
	got := inspectJSONOf(t, ctx, "-redis", url, "scheduler")
	if len(got.Locks) != 1 {
		t.Fatalf("inspect -json: %+v", got)
	}
	lk := got.Locks[0]
	if lk.Kind != "election" || len(lk.Holders) != 1 || lk.Holders[0].Token != leader.Token() || lk.Holders[0].Metadata != "host a" ||
		len(lk.Waiters) != 1 || lk.Waiters[0].Metadata != "host b" {
		t.Fatalf("inspect -json: %+v", lk)
	}
	leader.Release(ctx)
	granted(t, next).Release(ctx)
}
