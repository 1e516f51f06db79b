package fairlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/fairlock/fairlock/fairlock"
	"github.com/redis/go-redis/v9"
)

func TestBadInput(t *testing.T) {
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
	if _, err := l.Inspect(ctx, ""); !errors.Is(err, fairlock.ErrInvalid) {
		t.Errorf("Inspect(\"\"): %v", err)
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
	sa.Release(ctx)
	sb.Release(ctx)
}
