//go:build fairlock

package main

import (
	"context"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/scripts"
	"github.com/redis/go-redis/v9"
)

type fairlockWorker struct {
	cl *redis.Client
	l  *fairlock.Locker
}

func (w *fairlockWorker) Lock(ctx context.Context, name string) (unlockFunc, error) {
	lease, err := w.l.Acquire(ctx, name)
	if err != nil {
		return nil, err
	}
	return lease.Release, nil
}

// Queued reports the live waiters on name (used to know when every waiter
// of the scale scenario has been enqueued).
func (w *fairlockWorker) Queued(ctx context.Context, name string) (int, error) {
	st, err := w.l.Inspect(ctx, name)
	return st.Waiters, err
}

func (w *fairlockWorker) Close() error {
	err := w.l.Close()
	w.cl.Close()
	return err
}

func fairlockPeer() peer {
	return peer{
		Name:       "fairlock",
		Settings:   "fairlock (this repo), one Locker per worker/process, WithLeaseTTL(lease), default WaiterTTL 3s, auto-renew on",
		Redis:      true,
		Concurrent: true,
		New: func(e *env, c *counters) (worker, error) {
			cl := newRedisClient(e.RedisAddr, c)
			l, err := fairlock.New(cl, fairlock.WithLeaseTTL(e.LeaseTTL))
			if err != nil {
				cl.Close()
				return nil, err
			}
			return &fairlockWorker{cl: cl, l: l}, nil
		},
	}
}

func init() {
	for name, src := range map[string]string{
		"acquire": scripts.Acquire, "release": scripts.Release, "cancel": scripts.Cancel,
		"extend": scripts.Extend, "heartbeat": scripts.Heartbeat, "inspect": scripts.Inspect,
		"seed": scripts.Seed,
	} {
		nameScript(name, redis.NewScript(src))
	}
}
