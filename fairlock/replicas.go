package fairlock

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// WithReplicaAck makes Acquire and TryAcquire wait until n replicas have
// acknowledged a grant (Redis WAIT, bounded by timeout) before returning
// it. This narrows the window in which a failover loses a granted lock; it
// does not close it, because a replica that acknowledged may still not be
// the one promoted. Use fences for correctness. It needs a *redis.Client
// (including a Sentinel failover client) or a *redis.ClusterClient, and
// costs one round trip plus the replication delay per grant.
func WithReplicaAck(n int, timeout time.Duration) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: replica count must be at least 1, got %d", ErrInvalid, n)
		}
		c.replicas, c.replicaTimeout = n, timeout
		return checkTTL("replica timeout", timeout)
	}
}

// awaitReplicas confirms a fresh grant on the primary that holds the lock
// and waits for its replicas. WAIT only covers the writes of its own
// connection, so the confirmation, a write ordered after the grant in the
// replication stream, goes on the same connection first.
func (l *Locker) awaitReplicas(ctx context.Context, lease *Lease) error {
	var node *redis.Client
	var err error
	switch c := l.client.(type) {
	case *redis.ClusterClient:
		node, err = c.MasterForKey(ctx, lease.ref.keys[0])
	case *redis.Client:
		node = c
	default:
		err = fmt.Errorf("%w: WithReplicaAck needs a *redis.Client or *redis.ClusterClient, not %T", ErrInvalid, l.client)
	}
	if err == nil {
		err = l.confirmOn(ctx, node.Conn(), lease)
	}
	return err
}

func (l *Locker) confirmOn(ctx context.Context, conn *redis.Conn, lease *Lease) error {
	defer conn.Close()
	sent := time.Now()
	held, err := lease.ref.kind.scripts.Extend.run(ctx, conn, lease.ref.call(lease.token, l.cfg.recordTTL().Milliseconds(), flag(lease.hasMeta), noArg), retried).Int()
	if err != nil {
		return err
	}
	if held == 0 {
		lease.lose()
		return ErrLost
	}
	lease.renewed(sent)
	acked, err := conn.Wait(ctx, l.cfg.replicas, l.cfg.replicaTimeout).Result()
	if err != nil {
		return err
	}
	if acked < int64(l.cfg.replicas) {
		return fmt.Errorf("%w: %d of %d", ErrNotReplicated, acked, l.cfg.replicas)
	}
	return nil
}
