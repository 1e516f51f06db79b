package fairlock_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/fairlock/fairlock/fairlock"
	"github.com/redis/go-redis/v9"
)

// The scripts also run on miniredis's Lua, which users' unit tests (and
// fairlocktest) rely on: waiters must outlive their TTL there too, kept by
// the heartbeat.
func TestWaitersSurviveHeartbeatsOnMiniredis(t *testing.T) {
	mr := miniredis.RunT(t)
	mr.ClockTTL(true) // expire keys in real time, as Redis does
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer c.Close()
	l := newLocker(t, c)
	ctx := withTimeout(t, 10*time.Second)
	held := mustAcquire(t, l, "mini")
	waits := []<-chan result{queueBehind(t, ctx, l, "mini"), queueBehind(t, ctx, l, "mini")}
	time.Sleep(waiterTTL + 5*l.Heartbeat())
	if st, err := l.Inspect(ctx, fairlock.LockMutex, "mini"); err != nil || len(st.Waiters) != 2 || !st.Held() || st.Holders[0].Token != held.Token() {
		t.Fatalf("after 5 heartbeats past the waiter TTL: %+v %v", st, err)
	}
	released(t, held)
	for _, w := range waits {
		s, _ := await(t, w, time.Second)
		released(t, s)
	}
}
