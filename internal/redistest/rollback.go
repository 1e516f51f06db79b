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
	replica := Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.Port), "--repl-diskless-sync-delay", "0")
	p := &Pair{Primary: primary, Replica: replica, Proxy: StartProxy(t, primary.Addr)}
	p.WaitSynced(t)
	return p
}

// WaitSynced waits until the replica has everything the primary wrote.
// A replica link that stays behind for a second is cut, so that the
// replica starts it again: a handshake that met the stall's ACL rule half
// way once left a link up that carried nothing.
func (p *Pair) WaitSynced(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	behind := time.Now()
	for {
		lag, err := ReplicationLag(ctx, p.Primary, p.Replica)
		if err == nil && lag == 0 && linkUp(ctx, p.Replica) {
			return
		}
		if time.Since(behind) > time.Second {
			c := redis.NewClient(&redis.Options{Addr: p.Primary.Addr, MaxRetries: -1})
			c.ClientKillByFilter(ctx, "TYPE", "replica") //nolint:errcheck // checked by the next round
			c.Close()
			behind = time.Now()
		}
		if ctx.Err() != nil {
			info := func(s *Server) string {
				c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
				defer c.Close()
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				return c.Info(ctx, "replication").Val()
			}
			t.Fatalf("replica %s not in sync with %s: lag %d, %v\nprimary: %s\nreplica: %s", p.Replica.Addr, p.Primary.Addr, lag, err, info(p.Primary), info(p.Replica))
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

// Resume lets a stalled replication go on: the replica syncs again.
func (p *Pair) Resume(t testing.TB) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: p.Primary.Addr, MaxRetries: -1})
	defer c.Close()
	if err := c.Do(context.Background(), "ACL", "SETUSER", "default", "+psync", "+sync", "+replconf").Err(); err != nil {
		t.Fatalf("resume replication: %v", err)
	}
	p.WaitSynced(t)
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
	if err := promoted.ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
		t.Fatalf("promote %s: %v", p.Replica.Addr, err)
	}
	p.Proxy.Retarget(p.Replica.Addr)
	old := p.Primary
	p.Primary, p.Replica = p.Replica, old
	// Each restarts in its new role: the promoted one as a primary, the
	// old one as its replica.
	p.Primary.args = withoutReplicaOf(p.Primary.args)
	old.args = append(withoutReplicaOf(old.args), "--replicaof", "127.0.0.1", strconv.Itoa(p.Primary.Port))
	old.mustStart(t)
}

// withoutReplicaOf is a server's arguments without "--replicaof host port".
func withoutReplicaOf(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--replicaof" {
			i += 2
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// Save writes the server's data to its snapshot file (SAVE), which
// RestartFromSnapshot loads.
func (s *Server) Save(t testing.TB) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		// A child process of a replica's sync refuses SAVE for a moment.
		err := c.Save(context.Background()).Err()
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "in progress") || time.Now().After(deadline) {
			t.Fatalf("SAVE on %s: %v", s.Addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// RestartFromSnapshot kills the server and starts it again on the same
// port from its last Save: the writes since are lost, what came before is
// back.
func (s *Server) RestartFromSnapshot(t testing.TB) {
	t.Helper()
	s.Kill()
	s.mustStart(t)
}
