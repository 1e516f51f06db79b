package fairlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/fairlock/fairlock/scripts"
	"github.com/redis/go-redis/v9"
)

var (
	acquireScript   = newScript(scripts.Acquire)
	releaseScript   = newScript(scripts.Release)
	cancelScript    = newScript(scripts.Cancel)
	extendScript    = newScript(scripts.Extend)
	heartbeatScript = newScript(scripts.Heartbeat)
	inspectScript   = newScript(scripts.Inspect)
	seedScript      = newScript(scripts.Seed)
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
	holder    *Lease
	tokens    []string
	positions bool // count the waiters' places
	cmd       *redis.Cmd
}

// runHeartbeats sends every call in one pipeline. A pipeline cannot fall back
// from EVALSHA to EVAL by itself, so on NOSCRIPT (after SCRIPT FLUSH or a
// restart) it loads the script and sends the batch once more.
func (l *Locker) runHeartbeats(ctx context.Context, calls []*heartbeatCall) error {
	send := func() error {
		_, err := l.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, c := range calls {
				holder := ""
				if c.holder != nil {
					holder = c.holder.token
				}
				positions := "0"
				if c.positions {
					positions = "1"
				}
				args := append([]any{l.waiterMs, l.leaseMs, c.ref.notify[0], c.ref.notify[1], holder, positions}, toAny(c.tokens)...)
				c.cmd = heartbeatScript.EvalSha(ctx, p, c.ref.keys, args...)
			}
			return nil
		})
		return err
	}
	err := send()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		if err = heartbeatScript.Load(ctx, l.client).Err(); err == nil {
			err = send()
		}
	}
	return err
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
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

// parseGrant reads a grant notification, "token fence".
func parseGrant(payload string) (token string, fence int64, ok bool) {
	token, f, ok := strings.Cut(payload, " ")
	if !ok || token == "" {
		return "", 0, false
	}
	fence, err := strconv.ParseInt(f, 10, 64)
	return token, fence, err == nil && fence > 0
}
