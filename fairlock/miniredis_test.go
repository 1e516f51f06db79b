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
	t.Parallel()
	mr := miniredis.RunT(t)
	mr.ClockTTL(true) // expire keys in real time, as Redis does
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer c.Close()
	// TTLs of 1.5 s: the package's 600 ms waiter TTL leaves a heartbeat
	// 400 ms, which miniredis's Lua under -race, with the other packages'
	// tests beside it, has missed: in a local run with a bench beside it
	// the holder's session lapsed, and in a CI run a grant came more than
	// a second after its release.
	const ttl = 1500 * time.Millisecond
	l := newLocker(t, c, fairlock.WithLeaseTTL(ttl), fairlock.WithWaiterTTL(ttl))
	ctx := withTimeout(t, 20*time.Second)
	held := mustAcquire(t, l, "mini")
	waits := []<-chan result{queueBehind(t, ctx, l, "mini"), queueBehind(t, ctx, l, "mini")}
	time.Sleep(ttl + 3*l.Heartbeat())
	if st, err := l.Inspect(ctx, fairlock.LockMutex, "mini"); err != nil || len(st.Waiters) != 2 || !st.Held() || st.Holders[0].Token != held.Token() {
		t.Fatalf("after 3 heartbeats past the waiter TTL: %+v %v", st, err)
	}
	released(t, held)
	for _, w := range waits {
		// The README's bound for a lost message, a heartbeat, and slack.
		s, _ := await(t, w, l.Heartbeat()+slack)
		released(t, s)
	}
}
