package fairlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/fairlock/fairlock/scripts"
	"github.com/redis/go-redis/v9"
)

// A scriptSet is the queue engine's scripts on one holder store.
type scriptSet struct {
	acquire, release, cancel, extend, heartbeat *luaScript
}

var (
	// mutexScripts keep the holder in one string key.
	mutexScripts = scriptSet{
		acquire:   newScript(scripts.Acquire),
		release:   newScript(scripts.Release),
		cancel:    newScript(scripts.Cancel),
		extend:    newScript(scripts.Extend),
		heartbeat: newScript(scripts.Heartbeat),
	}
	// countedScripts keep the holders of a semaphore or read-write lock in
	// a sorted set, with the permits they hold counted.
	countedScripts = scriptSet{
		acquire:   newScript(scripts.CountedAcquire),
		release:   newScript(scripts.CountedRelease),
		cancel:    newScript(scripts.CountedCancel),
		extend:    newScript(scripts.CountedExtend),
		heartbeat: newScript(scripts.CountedHeartbeat),
	}
	inspectScript = newScript(scripts.Inspect)
	seedScript    = newScript(scripts.Seed)
)

// A luaScript is one script of package scripts. It runs with EVALSHA and,
// when Redis does not have it (after SCRIPT FLUSH or a restart), EVAL.
type luaScript struct {
	*redis.Script     // for pipelines, which cannot fall back by themselves
	sha, src      any // boxed once: a call allocates only its own arguments
}

func newScript(src string) *luaScript {
	s := redis.NewScript(src)
	return &luaScript{Script: s, sha: s.Hash(), src: src}
}

// run sends the script with args, made by lockRef.call, on c (a client or
// a connection).
func (s *luaScript) run(ctx context.Context, c interface {
	Do(context.Context, ...any) *redis.Cmd
}, r *lockRef, args []any) *redis.Cmd {
	args[0], args[1], args[2] = "evalsha", s.sha, len(r.args)
	cmd := c.Do(ctx, args...)
	if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		args[0], args[1] = "eval", s.src
		cmd = c.Do(ctx, args...)
	}
	return cmd
}

// Modes of acquire.lua, boxed once: never queue, queue, or queue and count
// the position (a ZCOUNT, paid only when someone listens for it).
var (
	modeTry   any = "try"
	modeWait  any = "wait"
	modeCount any = "count"
)

// Metadata as script arguments: acquire.lua takes the string, and
// release, cancel and extend a flag that says whether there is an entry to
// drop or keep. Without metadata both are "", boxed once, so such a call
// allocates nothing more and its scripts run no command for metadata.
var (
	noMeta  any = ""
	hasMeta any = "1"
)

// noCapacity is the heartbeat's capacity argument for a mutex.
var noCapacity any = ""

func metaValue(metadata string) any {
	if metadata == "" {
		return noMeta
	}
	return metadata
}

func metaFlag(has bool) any {
	if has {
		return hasMeta
	}
	return noMeta
}

// heartbeatCall is one heartbeat.lua call: one lock of this Locker.
type heartbeatCall struct {
	ref       *lockRef
	capacity  any      // a semaphore's capacity, "" for a mutex
	holders   []*Lease // leases to renew
	tokens    []string // waiters
	positions bool     // count the waiters' places
	cmd       *redis.Cmd
}

// runHeartbeats sends every call in one pipeline. A pipeline cannot fall back
// from EVALSHA to EVAL by itself, so on NOSCRIPT (after SCRIPT FLUSH or a
// restart) it loads the script and sends the batch once more.
func (l *Locker) runHeartbeats(ctx context.Context, calls []*heartbeatCall) error {
	send := func() error {
		_, err := l.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, c := range calls {
				positions := "0"
				if c.positions {
					positions = "1"
				}
				args := make([]any, 0, 7+len(c.holders)+len(c.tokens))
				args = append(args, l.waiterMs, l.leaseMs, c.ref.notify[0], c.ref.notify[1], positions, c.capacity, len(c.holders))
				for _, s := range c.holders {
					args = append(args, s.token)
				}
				for _, token := range c.tokens {
					args = append(args, token)
				}
				c.cmd = c.ref.scripts.heartbeat.EvalSha(ctx, p, c.ref.keys, args...)
			}
			return nil
		})
		return err
	}
	err := send()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		for _, set := range []*scriptSet{&mutexScripts, &countedScripts} {
			if err = set.heartbeat.Load(ctx, l.client).Err(); err != nil {
				return err
			}
		}
		err = send()
	}
	return err
}

// notifyRefused tells whether err is Redis refusing a script's PUBLISH or
// SPUBLISH for want of the channel in the user's ACL rule. Redis 7.0 says
// "can't publish to the channel", later versions "no permissions to access
// the ... channel"; keys and commands refused never name a channel.
func notifyRefused(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "channel") && (strings.Contains(msg, "publish") || strings.Contains(msg, "permissions"))
}

// parseInts reads a script reply that is an array of integers.
func parseInts(reply any, n int) ([]int64, error) {
	arr, ok := reply.([]any)
	if !ok || (n > 0 && len(arr) != n) {
		return nil, fmt.Errorf("fairlock: unexpected script reply %v", reply)
	}
	out := make([]int64, len(arr))
	for i, v := range arr {
		if out[i], ok = v.(int64); !ok {
			return nil, fmt.Errorf("fairlock: unexpected script reply %v", reply)
		}
	}
	return out, nil
}

// parseInspect reads inspect.lua's reply.
func parseInspect(reply any) (holder, meta string, ttlMs, fence, waiters int64, err error) {
	arr, ok := reply.([]any)
	if ok && len(arr) == 5 {
		holder, ok = arr[0].(string)
		nums, nerr := parseInts(arr[1:4], 3)
		var mok bool
		meta, mok = arr[4].(string)
		if ok && mok && nerr == nil {
			return holder, meta, nums[0], nums[1], nums[2], nil
		}
	}
	return "", "", 0, 0, 0, fmt.Errorf("fairlock: unexpected inspect reply %v", reply)
}

// parseGrants reads a grant notification, "token fence token fence ...",
// and calls fn for each grant, in order. It stops at the first malformed
// pair and reports whether there was none.
func parseGrants(payload string, fn func(token string, fence int64)) bool {
	for payload != "" {
		token, rest, ok := strings.Cut(payload, " ")
		if !ok || token == "" {
			return false
		}
		f, next, _ := strings.Cut(rest, " ")
		fence, err := strconv.ParseInt(f, 10, 64)
		if err != nil || fence <= 0 {
			return false
		}
		fn(token, fence)
		payload = next
	}
	return true
}
