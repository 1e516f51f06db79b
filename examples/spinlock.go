package main

import (
	"context"
	"crypto/rand"
	"time"

	"github.com/redis/go-redis/v9"
)

// spinRetry is how long the spin locks (spinLock, spinSemaphore,
// spinRWLock) sleep between tries: a common retry delay.
const spinRetry = 20 * time.Millisecond

// spinLock is the usual "correct" Redis lock from the seed articles: SET NX
// PX with a random token, released by a compare-and-delete script. It is
// safe, but not fair: whoever happens to retry first after a release wins,
// and the releaser itself, already awake and one round trip away, usually
// wins again. It sleeps between tries, which is kinder than the seed's
// busy loop and just as unfair.
type spinLock struct {
	rdb   *redis.Client
	key   string
	ttl   time.Duration
	retry time.Duration
}

var compareAndDelete = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

// lock spins until it owns the key, and returns the function that unlocks.
// Without a queue, the caller is in line as soon as it asks.
func (s spinLock) lock(ctx context.Context, inLine func()) (func(context.Context) error, error) {
	inLine()
	token := rand.Text()
	for {
		ok, err := s.rdb.SetNX(ctx, s.key, token, s.ttl).Result()
		if err != nil {
			return nil, err
		}
		if ok {
			return func(ctx context.Context) error {
				return compareAndDelete.Run(ctx, s.rdb, []string{s.key}, token).Err()
			}, nil
		}
		select {
		case <-time.After(s.retry):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
