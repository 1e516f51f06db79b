package main

import (
	"context"
	"crypto/rand"
	"time"

	"github.com/redis/go-redis/v9"
)

// spinRWLock is a read-write lock on Redis without a queue, as most are: a
// reader gets in whenever no writer holds the lock, and a writer only when
// no reader does, each retrying every retry until it does. Readers who
// keep coming keep the readers' set from ever being empty, so a writer
// waits for a gap that does not come.
type spinRWLock struct {
	rdb   *redis.Client
	key   string // key:writer holds the writer's token; key:readers the readers, token -> lease deadline
	ttl   time.Duration
	retry time.Duration
}

// rlockScript: KEYS writer, readers; ARGV token, lease ms.
var rlockScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local t = redis.call('TIME')
redis.call('ZADD', KEYS[2], t[1] * 1000 + math.floor(t[2] / 1000) + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1`)

// lockScript: the same keys and arguments; readers whose lease ran out
// are dropped first.
var lockScript = redis.NewScript(`
local t = redis.call('TIME')
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', t[1] * 1000 + math.floor(t[2] / 1000))
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('ZCARD', KEYS[2]) > 0 then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`)

var unlockScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

func (s spinRWLock) rlock(ctx context.Context) (func(context.Context) error, error) {
	token, err := s.spin(ctx, rlockScript)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return s.rdb.ZRem(ctx, s.key+":readers", token).Err() }, nil
}

func (s spinRWLock) lock(ctx context.Context) (func(context.Context) error, error) {
	token, err := s.spin(ctx, lockScript)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		return unlockScript.Run(ctx, s.rdb, []string{s.key + ":writer"}, token).Err()
	}, nil
}

// spin runs script until it lets the caller in, and returns the caller's token.
func (s spinRWLock) spin(ctx context.Context, script *redis.Script) (string, error) {
	token := rand.Text()
	keys := []string{s.key + ":writer", s.key + ":readers"}
	for {
		ok, err := script.Run(ctx, s.rdb, keys, token, s.ttl.Milliseconds()).Int()
		if err != nil {
			return "", err
		}
		if ok == 1 {
			return token, nil
		}
		select {
		case <-time.After(s.retry):
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}
