package main

import (
	"context"
	"crypto/rand"
	"time"

	"github.com/redis/go-redis/v9"
)

// spinSemaphore is a semaphore on Redis without a queue, as most are: a
// sorted set of holders, each with the deadline of its lease, and a script
// that drops expired holders and adds the caller if fewer than capacity
// remain: compare and increment. It keeps the limit, but whoever asks
// right after a permit frees gets it, and the worker that just gave one
// back, awake and one round trip away, usually does. The others retry
// every retry and mostly find the permits taken again.
type spinSemaphore struct {
	rdb      *redis.Client
	key      string
	capacity int
	ttl      time.Duration
	retry    time.Duration
}

// takePermit: KEYS[1] the holders; ARGV capacity, token, lease ms.
var takePermit = redis.NewScript(`
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`)

// acquire spins until it holds a permit, and returns the function that
// gives it back.
// Without a queue, the caller is in line as soon as it asks.
func (s spinSemaphore) acquire(ctx context.Context, inLine func()) (func(context.Context) error, error) {
	inLine()
	token := rand.Text()
	for {
		ok, err := takePermit.Run(ctx, s.rdb, []string{s.key}, s.capacity, token, s.ttl.Milliseconds()).Int()
		if err != nil {
			return nil, err
		}
		if ok == 1 {
			return func(ctx context.Context) error { return s.rdb.ZRem(ctx, s.key, token).Err() }, nil
		}
		select {
		case <-time.After(s.retry):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
