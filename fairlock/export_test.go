package fairlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// FloorCycle returns fairlock's uncontended cycle on name without
// fairlock's Go code, for BenchmarkSideBySide: the calls a Locker sends
// (acquire_fast.lua, then release_fast.lua), from a plain loop on client,
// each round trip under ctx(). Beside naive's and fairlock's cycles it
// splits fairlock's cost into what its promises cost Redis and the wire
// (floor ÷ naive) and what its own Go code costs (fairlock ÷ floor). l
// gives only the lock's keys: none of its calls are made.
func FloorCycle(l *Locker, client *redis.Client, name string, ctx func() (context.Context, context.CancelFunc)) func() error {
	ref := l.refs.get(mutexKind, name)
	session := ref.sessions + "floor.1"
	// The session a Locker's heartbeat would keep, for the benchmark's
	// length (it runs on a redis-server of its own).
	setup, cancel := ctx()
	client.HSet(setup, session, "", 1)
	client.PExpire(setup, session, 10*time.Minute)
	cancel()
	var seq uint64
	return func() error {
		seq++
		token := "floor.1:" + strconv.FormatUint(seq, 36)
		c, cancel := ctx()
		err := acquireFast.run(c, client, []any{nil, nil, 4, ref.keys[0], ref.keys[3], ref.keys[2], session, token, 10_000}, once).Err()
		cancel()
		if err != nil {
			return err
		}
		c, cancel = ctx()
		defer cancel()
		return releaseFast.run(c, client, []any{nil, nil, 3, ref.keys[0], ref.keys[2], session, token}, once).Err()
	}
}

// Batched is how many calls wait in l's batcher for the batch in flight.
func Batched(l *Locker) int {
	l.batch.mu.Lock()
	defer l.batch.mu.Unlock()
	n := 0
	for _, line := range l.batch.lines {
		n += len(line.queue)
	}
	return n
}

// LateOpening sends on client, as a request of l's current session on name
// that arrived late would, acquire_fast.lua's opening of that session, with
// token; the lock must be held by someone else, so that only the opening
// runs.
func LateOpening(ctx context.Context, l *Locker, client *redis.Client, name, token string) error {
	ref := l.refs.get(mutexKind, name)
	l.books.mu.Lock()
	s := l.books.current[ref.scope]
	l.books.mu.Unlock()
	if s == nil {
		return errors.New("no current session")
	}
	open := l.books.openArgs(&session{})
	args := append([]any{nil, nil, 5, ref.keys[0], ref.keys[3], ref.keys[2], s.keys[0], s.keys[1], token, l.refs.recordMs}, open...)
	fence, err := acquireFast.run(ctx, client, args, once).Int64()
	if err == nil && fence != 0 {
		return fmt.Errorf("the late opening took the lock (%d)", fence)
	}
	return err
}

// EndedAt is when the lease ended here: a test that learns of it on Done
// reads the instant, not when its goroutine woke.
func EndedAt(s *Lease) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// WithdrawBeforeOpening withdraws token for good, as a party of the session
// that l's next request on the mutex name opens: the withdrawal reaches
// Redis first, as one that overtook the request that would have opened
// the session.
func WithdrawBeforeOpening(ctx context.Context, l *Locker, name, token string) error {
	ref := l.refs.get(mutexKind, name)
	l.books.mu.Lock()
	s := l.books.sessionFor(ref, l.id)
	l.books.mu.Unlock()
	return l.cancelToken(ctx, ref, s, s.id+":"+token, false, true)
}
