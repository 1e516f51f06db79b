package fairlock_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/fairlock/fairlock/fairlock"
	"github.com/redis/go-redis/v9"
)

func TestBadInput(t *testing.T) {
	t.Parallel()
	if _, err := fairlock.New(nil); !errors.Is(err, fairlock.ErrInvalid) {
		t.Fatalf("New(nil): %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	defer c.Close()
	for name, opt := range map[string]fairlock.Option{
		"zero lease":       fairlock.WithLeaseTTL(0),
		"negative lease":   fairlock.WithLeaseTTL(-time.Second),
		"sub-ms lease":     fairlock.WithLeaseTTL(time.Microsecond),
		"zero waiter":      fairlock.WithWaiterTTL(0),
		"negative waiter":  fairlock.WithWaiterTTL(-1),
		"brace prefix":     fairlock.WithKeyPrefix("app{1}"),
		"nil observer":     fairlock.WithObserver(nil),
		"nil logger":       fairlock.WithLogger(nil),
		"nil option value": nil,
	} {
		if _, err := fairlock.New(c, opt); !errors.Is(err, fairlock.ErrInvalid) {
			t.Errorf("%s: New returned %v, want ErrInvalid", name, err)
		}
	}
	l, err := fairlock.New(c, fairlock.WithLeaseTTL(100*time.Millisecond), fairlock.WithWaiterTTL(100*time.Millisecond))
	if err != nil {
		t.Fatalf("short TTLs must be valid: %v", err)
	}
	defer l.Close()
	ctx := context.Background()
	if _, err := l.Acquire(ctx, ""); !errors.Is(err, fairlock.ErrInvalid) {
		t.Errorf("Acquire(\"\"): %v", err)
	}
	if _, err := l.Inspect(ctx, fairlock.LockMutex, ""); !errors.Is(err, fairlock.ErrInvalid) {
		t.Errorf("Inspect(\"\"): %v", err)
	}
	// An unknown kind of lock is refused, never taken for a mutex.
	for _, k := range []fairlock.LockKind{0, 99} {
		if _, err := l.Inspect(ctx, k, "x"); !errors.Is(err, fairlock.ErrInvalid) {
			t.Errorf("Inspect of kind %d: %v", k, err)
		}
		if _, err := l.ForceRelease(ctx, k, "x", ""); !errors.Is(err, fairlock.ErrInvalid) {
			t.Errorf("ForceRelease of kind %d: %v", k, err)
		}
		if _, err := k.Info(); k.String() != "unknown" || !errors.Is(err, fairlock.ErrInvalid) {
			t.Errorf("kind %d is called %q, described with %v", k, k.String(), err)
		}
	}
	s, err := l.Acquire(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Extend(ctx, 0); !errors.Is(err, fairlock.ErrInvalid) {
		t.Errorf("Extend(0): %v", err)
	}
	if err := s.Extend(ctx, -time.Second); !errors.Is(err, fairlock.ErrInvalid) {
		t.Errorf("Extend(-1s): %v", err)
	}
	if s.Err() != nil {
		t.Errorf("a bad Extend ended the lease: %v", s.Err())
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Acquire(cancelled, "y"); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire with a done context: %v", err)
	}
	if err := s.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx); !errors.Is(err, fairlock.ErrNotHeld) {
		t.Errorf("second Release: %v", err)
	}
}

func TestKeyPrefixNamespacesLocks(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer c.Close()
	ctx := context.Background()
	a, _ := fairlock.New(c, fairlock.WithKeyPrefix("app1"))
	defer a.Close()
	b, _ := fairlock.New(c, fairlock.WithKeyPrefix("app2"))
	defer b.Close()
	sa, err := a.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.TryAcquire(ctx, "job")
	if err != nil {
		t.Fatalf("another prefix shares the lock: %v", err)
	}
	if !mr.Exists("app1:{job}:lock") || !mr.Exists("app2:{job}:lock") {
		t.Fatalf("keys %v", mr.Keys())
	}
	released(t, sa)
	released(t, sb)
}

func TestTTLsBelowTheHeartbeatFloor(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // New never contacts Redis
	defer c.Close()
	floor := 3 * fairlock.MinHeartbeat
	for name, opts := range map[string][]fairlock.Option{
		"1ms waiter":       {fairlock.WithWaiterTTL(time.Millisecond)},
		"1ms lease":        {fairlock.WithLeaseTTL(time.Millisecond)},
		"just under lease": {fairlock.WithLeaseTTL(floor - time.Millisecond), fairlock.WithWaiterTTL(time.Hour)},
		// Checked after all options: a later option does not hide an earlier one.
		"waiter then lease": {fairlock.WithWaiterTTL(10 * time.Millisecond), fairlock.WithLeaseTTL(time.Hour)},
	} {
		_, err := fairlock.New(c, opts...)
		if !errors.Is(err, fairlock.ErrInvalid) || !strings.Contains(err.Error(), "MinHeartbeat (25ms)") {
			t.Errorf("%s: %v, want ErrInvalid naming the floor", name, err)
		}
	}
	l, err := fairlock.New(c, fairlock.WithLeaseTTL(floor), fairlock.WithWaiterTTL(floor))
	if err != nil {
		t.Fatalf("TTLs at the floor: %v", err)
	}
	defer l.Close()
	if l.Heartbeat() != fairlock.MinHeartbeat {
		t.Errorf("heartbeat %v at the floor, want %v", l.Heartbeat(), fairlock.MinHeartbeat)
	}
}

// Names over MaxNameLen are refused before any Redis call, by every entry
// point, and the error quotes only a short prefix of the name.
func TestLongNames(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	c := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	defer c.Close()
	c.AddHook(countHook{&calls})
	l, err := fairlock.New(c)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	huge := "account:42:" + strings.Repeat("x", 8<<20)
	do := func(context.Context) error { return nil }
	for what, call := range map[string]func(name string) error{
		"Acquire":      func(n string) error { _, err := l.Acquire(ctx, n); return err },
		"TryAcquire":   func(n string) error { _, err := l.TryAcquire(ctx, n); return err },
		"Do":           func(n string) error { return l.Do(ctx, n, do) },
		"Inspect":      func(n string) error { _, err := l.Inspect(ctx, fairlock.LockSemaphore, n); return err },
		"ForceRelease": func(n string) error { _, err := l.ForceRelease(ctx, fairlock.LockRWMutex, n, ""); return err },
		"Mutex":        func(n string) error { _, err := l.Mutex(n); return err },
		"Semaphore":    func(n string) error { _, err := l.Semaphore(n, 2); return err },
	} {
		for _, name := range []string{huge, strings.Repeat("y", fairlock.MaxNameLen+1), ""} {
			err := call(name)
			if !errors.Is(err, fairlock.ErrInvalid) {
				t.Errorf("%s(%d bytes): %v, want ErrInvalid", what, len(name), err)
				continue
			}
			if msg := err.Error(); len(msg) > 200 || (name == huge && !strings.Contains(msg, `"account:42:xxxxxxxxxxxxxxxxxxxxx…" (8 MiB)`)) {
				t.Errorf("%s(%d bytes): error %.300q", what, len(name), msg)
			}
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("%d Redis calls for refused names", n)
	}
	s, err := l.TryAcquire(ctx, strings.Repeat("{", fairlock.MaxNameLen))
	if err != nil {
		t.Fatalf("a name of MaxNameLen bytes: %v", err)
	}
	released(t, s)
}

// countHook counts the commands a client sends.
type countHook struct{ n *atomic.Int64 }

func (countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// Log lines quote a long name cut short, with its length.
func TestLogLinesCutLongNames(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	defer c.Close()
	var buf bytes.Buffer
	var mu sync.Mutex
	l, err := fairlock.New(c, fairlock.WithLogger(slog.New(slog.NewTextHandler(&lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	s, err := l.TryAcquire(ctx, strings.Repeat("n", fairlock.MaxNameLen))
	if err != nil {
		t.Fatal(err)
	}
	released(t, s)
	l.Close()
	mu.Lock()
	defer mu.Unlock()
	for line := range strings.Lines(buf.String()) {
		if len(line) > 400 || !strings.Contains(line, `(4 KiB)`) {
			t.Errorf("log line %.500q", line)
		}
	}
	if buf.Len() == 0 {
		t.Error("nothing logged")
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}
