package fairlock

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// FloorCycle returns fairlock's uncontended cycle on name without
// fairlock's Go code, for BenchmarkSideBySide: the commands a Locker sends
// (the fast path's pipeline, then release_fast.lua with the same
// arguments), from a plain loop on client, each round trip under
// ctx(). Beside naive's and fairlock's cycles it splits fairlock's cost
// into what its promises cost Redis and the wire (floor ÷ naive) and what
// its own Go code costs (fairlock ÷ floor). l gives only the lock's keys:
// none of its calls are made.
func FloorCycle(l *Locker, client *redis.Client, name string, ctx func() (context.Context, context.CancelFunc)) func() error {
	ref := l.refs.get(mutexKind, name)
	session := ref.sessions + "floor.1"
	exists := []any{"exists", session, session, ref.keys[2]}
	// The session a Locker's heartbeat would keep, for the benchmark's
	// length (it runs on a redis-server of its own).
	setup, cancel := ctx()
	client.HSet(setup, session, "", 1)
	fenceFast.Load(setup, client) // a pipeline cannot fall back to EVAL
	client.PExpire(setup, session, 10*time.Minute)
	cancel()
	var seq uint64
	return func() error {
		seq++
		token := "floor.1:" + strconv.FormatUint(seq, 36)
		c, cancel := ctx()
		p := client.Pipeline()
		p.Do(c, exists...)
		p.Do(c, "set", ref.keys[0], token, "nx", "get", "px", 10_000)
		p.Do(c, "evalsha", fenceFast.sha, 2, ref.keys[0], ref.keys[3], token)
		_, err := p.Exec(c)
		cancel()
		if err != nil && err != redis.Nil { // SET GET found no holder
			return err
		}
		c, cancel = ctx()
		defer cancel()
		return releaseFast.run(c, client, []any{nil, nil, 3, ref.keys[0], ref.keys[2], session, token}, once).Err()
	}
}
