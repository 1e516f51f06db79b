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
	acquireScript   = redis.NewScript(scripts.Acquire)
	releaseScript   = redis.NewScript(scripts.Release)
	cancelScript    = redis.NewScript(scripts.Cancel)
	extendScript    = redis.NewScript(scripts.Extend)
	heartbeatScript = redis.NewScript(scripts.Heartbeat)
	inspectScript   = redis.NewScript(scripts.Inspect)
)

// Replies of acquire.lua.
const (
	acquireRefused = 0
	acquireGranted = 1
	acquireQueued  = 2
)

// Statuses of a waiter in heartbeat.lua's reply; any larger value is a fence.
const (
	waiterGone    = -1
	waiterWaiting = 0
)

// heartbeatCall is one heartbeat.lua call: one lock of this Locker.
type heartbeatCall struct {
	name   string
	keys   []string
	holder *Lease
	tokens []string
	cmd    *redis.Cmd
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
				notifyCmd, notifyPrefix := l.notifyArgs(c.keys)
				args := append([]any{l.cfg.waiterTTL.Milliseconds(), l.cfg.leaseTTL.Milliseconds(), notifyCmd, notifyPrefix, holder}, toAny(c.tokens)...)
				c.cmd = heartbeatScript.EvalSha(ctx, p, c.keys, args...)
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
func parseInspect(reply any) (holder string, ttlMs, fence, waiters int64, err error) {
	arr, ok := reply.([]any)
	if ok && len(arr) == 4 {
		holder, ok = arr[0].(string)
		nums, nerr := parseInts(arr[1:], 3)
		if ok && nerr == nil {
			return holder, nums[0], nums[1], nums[2], nil
		}
	}
	return "", 0, 0, 0, fmt.Errorf("fairlock: unexpected inspect reply %v", reply)
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
