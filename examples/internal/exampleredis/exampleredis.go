// Package exampleredis opens the Redis that every example runs against, so
// that each example stays about the lock and not about connection setup.
// The examples' main picks one and calls Main(run): run gets the open
// Redis and holds everything the example does with fairlock.
//
// With REDIS_URL set (for example redis://localhost:6379/0) the examples talk
// to that server. Without it they start an embedded miniredis, so
// `go run ./examples` works on a machine with no Redis installed.
package exampleredis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// EnvURL names the environment variable that selects a real Redis server.
const EnvURL = "REDIS_URL"

// Redis is an open connection to the example's Redis server.
type Redis struct {
	url  string
	opts *redis.Options
	mini *miniredis.Miniredis
	// Client is a client ready to use; it is closed by Close.
	Client *redis.Client

	mu    sync.Mutex
	extra []*redis.Client
}

// Open connects to REDIS_URL when it is set and otherwise starts an embedded
// miniredis. Call Close when done.
func Open(ctx context.Context) (*Redis, error) {
	r := &Redis{url: os.Getenv(EnvURL)}
	if r.url != "" {
		opts, err := redis.ParseURL(r.url)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvURL, err)
		}
		r.opts = opts
	} else {
		m := miniredis.NewMiniRedis()
		// Real Redis expires keys as wall-clock time passes; miniredis only
		// does so when asked. Leases must expire on their own for the
		// examples (a paused holder loses its lease), so turn that on.
		m.ClockTTL(true)
		if err := m.Start(); err != nil {
			return nil, fmt.Errorf("start miniredis: %w", err)
		}
		r.mini = m
		r.opts = &redis.Options{Addr: m.Addr()}
	}
	r.Client = redis.NewClient(r.opts)
	if err := r.Client.Ping(ctx).Err(); err != nil {
		r.Close()
		return nil, fmt.Errorf("ping %s: %w", r, err)
	}
	return r, nil
}

// NewClient returns one more client to the same server, as a separate
// process would have. It is closed by Close.
func (r *Redis) NewClient() *redis.Client {
	c := redis.NewClient(r.opts)
	r.mu.Lock()
	r.extra = append(r.extra, c)
	r.mu.Unlock()
	return c
}

// String says which server this is, for the examples' first line of output.
func (r *Redis) String() string {
	if r.mini != nil {
		return "embedded miniredis (set " + EnvURL + " to use a real server)"
	}
	return "redis at " + r.opts.Addr
}

// Close closes every client and stops the embedded server, if any.
func (r *Redis) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, c := range append(r.extra, r.Client) {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	if r.mini != nil {
		r.mini.Close()
	}
	return errors.Join(errs...)
}
