package fairlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// An Acquire that waits for one of the Locker's request slots ends with its
// context, or with the Locker's Close, having sent nothing.
func TestAcquireWaitingToSendEnds(t *testing.T) {
	srv := redistest.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 3})
	defer client.Close()
	l, err := New(client)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if cap(l.sends) != 1 {
		t.Fatalf("a pool of 3 gives %d request slots, want 1", cap(l.sends))
	}
	l.sends <- struct{}{} // a request in flight, which never ends

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := l.Acquire(ctx, "slots"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire while every slot is taken: %v, want its context's deadline", err)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := l.Acquire(context.Background(), "slots")
		ended <- err
	}()
	time.Sleep(50 * time.Millisecond) // let it wait for the slot
	go l.Close()
	select {
	case err := <-ended:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Acquire waiting for a slot as the Locker closed: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire waiting for a slot did not end with Close")
	}
	if n := srv.Client(t).Exists(context.Background(), "fairlock:{slots}:order", "fairlock:{slots}:lock").Val(); n != 0 {
		t.Fatalf("%d keys of the lock exist: a request was sent", n)
	}
}
