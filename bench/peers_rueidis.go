package main

import (
	"context"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// The peers of the many-names row on rueidis, whose client writes the
// commands of every goroutine waiting on a connection in one write and
// reads their replies in one read: the client-side batching fairlock's
// own batches (../fairlock/batch.go) are measured against. They run in
// the names row only (-names-rueidis): their round trips are not counted
// (no go-redis hook sees them), their Redis and client CPU are.

// naiveRueidisRelease is naiveRelease, for rueidis.
var naiveRueidisRelease = rueidis.NewLuaScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

// naiveRueidisWorker is the naive lock on one rueidis client.
type naiveRueidisWorker struct {
	cl         rueidis.Client
	ttl, delay time.Duration
}

func (w *naiveRueidisWorker) Lock(ctx context.Context, name string) (unlockFunc, error) {
	tok, key := token(), "naive-rueidis:"+name
	if _, err := spin(ctx, w.delay, func() (bool, error) {
		err := w.cl.Do(ctx, w.cl.B().Set().Key(key).Value(tok).Nx().PxMilliseconds(w.ttl.Milliseconds()).Build()).Error()
		if rueidis.IsRedisNil(err) {
			return false, nil
		}
		return err == nil, err
	}); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		return naiveRueidisRelease.Exec(ctx, w.cl, []string{key}, []string{tok}).Error()
	}, nil
}

func (w *naiveRueidisWorker) Close() error {
	w.cl.Close()
	return nil
}

// rueidislockWorker is rueidislock on one Redis key per lock
// (KeyMajority 1: one Redis, as the other peers use).
type rueidislockWorker struct{ l rueidislock.Locker }

func (w *rueidislockWorker) Lock(ctx context.Context, name string) (unlockFunc, error) {
	// The lock lives as long as the context WithContext returns: the
	// call's own context ends when Lock returns (lockCycle), so the lock's
	// is its values without its end.
	_, release, err := w.l.WithContext(context.WithoutCancel(ctx), name)
	if err != nil {
		return nil, err
	}
	return func(context.Context) error {
		release() // returns once its key is deleted
		return nil
	}, nil
}

func (w *rueidislockWorker) Close() error {
	w.l.Close()
	return nil
}

// rueidisPeers are the names row's peers on rueidis.
func rueidisPeers() []peer {
	return []peer{
		{
			Name:       "rueidislock",
			Settings:   "redis/rueidis/rueidislock v1.0.80, KeyMajority 1, NoLoopTracking, KeyValidity = lease; one Locker shared by the workers",
			Redis:      true,
			Concurrent: true,
			New: func(e *env, _ *counters) (worker, error) {
				l, err := rueidislock.NewLocker(rueidislock.LockerOption{
					ClientOption:   rueidis.ClientOption{InitAddress: []string{e.RedisAddr}},
					KeyMajority:    1,
					NoLoopTracking: true,
					KeyValidity:    e.LeaseTTL,
				})
				if err != nil {
					return nil, err
				}
				return &rueidislockWorker{l: l}, nil
			},
		},
		{
			Name:       "naive-rueidis",
			Settings:   "the naive lock (SET NX PX, then compare-and-delete by EVALSHA) on one redis/rueidis v1.0.80 client, no client-side cache",
			Redis:      true,
			Concurrent: true,
			New: func(e *env, _ *counters) (worker, error) {
				cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{e.RedisAddr}, DisableCache: true})
				if err != nil {
					return nil, err
				}
				return &naiveRueidisWorker{cl: cl, ttl: e.LeaseTTL, delay: e.SpinDelay}, nil
			},
		},
	}
}
