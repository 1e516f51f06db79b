package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Rollbacks: a Redis that answered writes and then lost them while keeping
// what came before, as a failover to a replica that missed them, or a
// restart from an older snapshot, does. What the clients see is the data
// of an earlier moment, served at the same address.

// A Pair is a primary, a replica of it, and a Proxy that clients dial,
// which follows the primary.
type Pair struct {
	Primary, Replica *Server
	Proxy            *Proxy
}

// StartPair starts a primary and a replica in sync with it, and the proxy
// in front of the primary.
func StartPair(t testing.TB) *Pair {
	t.Helper()
	primary := Start(t, "--repl-diskless-sync-delay", "0")
	replica := Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port))
	p := &Pair{Primary: primary, Replica: replica, Proxy: StartProxy(t, primary.Addr)}
	p.WaitSynced(t)
	return p
}

// WaitSynced waits until the replica has everything the primary wrote.
func (p *Pair) WaitSynced(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		lag, err := ReplicationLag(ctx, p.Primary, p.Replica)
		if err == nil && lag == 0 && linkUp(ctx, p.Replica) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("replica %s not in sync with %s: lag %d, %v", p.Replica.Addr, p.Primary.Addr, lag, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func linkUp(ctx context.Context, s *Server) bool {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	return strings.Contains(c.Info(ctx, "replication").Val(), "master_link_status:up")
}

// Stall stops replication: every write from now on is on the primary only
// (StallReplication).
func (p *Pair) Stall(t testing.TB) {
	t.Helper()
	if err := StallReplication(context.Background(), p.Primary); err != nil {
		t.Fatalf("stall replication: %v", err)
	}
}

// Failover kills the primary, promotes the replica, and sends the proxy's
// clients to it: they find the data of the moment replication stalled.
// The old primary comes back empty as the new one's replica, so that the
// pair can fail over again.
func (p *Pair) Failover(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p.Primary.Kill()
	promoted := redis.NewClient(&redis.Options{Addr: p.Replica.Addr, MaxRetries: -1})
	defer promoted.Close()
	if err := promoted.SlaveOf(ctx, "NO", "ONE").Err(); err != nil {
		t.Fatalf("promote %s: %v", p.Replica.Addr, err)
	}
	p.Proxy.Retarget(p.Replica.Addr)
	old := p.Primary
	p.Primary, p.Replica = p.Replica, old
	old.start(t)
	c := redis.NewClient(&redis.Options{Addr: old.Addr, MaxRetries: -1})
	defer c.Close()
	if err := c.SlaveOf(ctx, "127.0.0.1", strconv.Itoa(p.Primary.Port)).Err(); err != nil {
		t.Fatalf("make %s a replica of %s: %v", old.Addr, p.Primary.Addr, err)
	}
}

// Save writes the server's data to its snapshot file (SAVE), which
// RestartFromSnapshot loads.
func (s *Server) Save(t testing.TB) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	if err := c.Save(context.Background()).Err(); err != nil {
		t.Fatalf("SAVE on %s: %v", s.Addr, err)
	}
}

// RestartFromSnapshot kills the server and starts it again on the same
// port from its last Save: the writes since are lost, what came before is
// back.
func (s *Server) RestartFromSnapshot(t testing.TB) {
	t.Helper()
	s.Kill()
	s.start(t)
}
