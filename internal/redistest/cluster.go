package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterNodeTimeout is the cluster-node-timeout of the clusters started by
// StartCluster. A replica is promoted roughly 1–3 s after its primary dies
// (the timeout, then an election delay of 500 ms plus up to 500 ms jitter).
const ClusterNodeTimeout = 1500 * time.Millisecond

// Cluster is a Redis Cluster of 3 primaries and 3 replicas on loopback
// ports, built with `redis-cli --cluster create --cluster-replicas 1`.
// Every node is a Server started by Start, so each is killed by PID when the
// test ends.
type Cluster struct {
	Nodes []*Server // all six nodes, in the order given to redis-cli
	Addrs []string  // their addresses, seeds for redis.NewClusterClient
}

// CLIBinary returns the path of redis-cli (Debian package redis-tools), or
// skips (fails when RequireEnv is set) the test when it is not installed.
func CLIBinary(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("redis-cli")
	if err != nil {
		if os.Getenv(RequireEnv) != "" {
			t.Fatalf("redis-cli not found and %s is set (apt-get install redis-tools): %v", RequireEnv, err)
		}
		t.Skipf("redis-cli not installed (apt-get install redis-tools; set %s=1 to make this a failure)", RequireEnv)
	}
	return path
}

// StartCluster starts six cluster-enabled redis-server processes, joins them
// into a 3-primary/3-replica cluster and waits until every node reports
// cluster_state:ok with all 16384 slots covered and every replica is in sync.
// Extra args go to every redis-server as "--name value" pairs.
func StartCluster(t testing.TB, args ...string) *Cluster {
	t.Helper()
	cli := CLIBinary(t)
	c := &Cluster{}
	for i := 0; i < 6; i++ {
		nodeArgs := append([]string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.Itoa(int(ClusterNodeTimeout / time.Millisecond)),
			// The bus port defaults to port+10000, which may be taken or
			// beyond 65535; give it its own free port.
			"--cluster-port", strconv.Itoa(FreePort(t)),
			// Let a replica fail over even if it lagged for a while.
			"--cluster-replica-validity-factor", "0",
			// Sync replicas at once, not after the default 5 s wait.
			"--repl-diskless-sync-delay", "0",
		}, args...)
		s := Start(t, nodeArgs...)
		c.Nodes = append(c.Nodes, s)
		c.Addrs = append(c.Addrs, s.Addr)
	}
	argv := append([]string{"--cluster", "create"}, c.Addrs...)
	argv = append(argv, "--cluster-replicas", "1", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, cli, argv...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitHealthy(t, 30*time.Second)
	c.ensureReplicas(t, out)
	c.WaitHealthy(t, 30*time.Second)
	return c
}

// ensureReplicas makes sure each primary has one replica. redis-cli sends
// CLUSTER REPLICATE before every node knows every other, and on a loaded
// machine a replica sometimes stays an empty primary, or follows a primary
// that has one already (a CI run found both replicas on one primary and
// none on another); pair those up here.
func (c *Cluster) ensureReplicas(t testing.TB, createOut []byte) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		nodes, err := c.Topology(ctx)
		cancel()
		if err != nil {
			t.Fatalf("cluster nodes: %v", err)
		}
		hasReplica := map[string]bool{}
		var orphans, spare []ClusterNode
		for _, n := range nodes {
			switch {
			case n.Master:
			case hasReplica[n.MasterID]:
				spare = append(spare, n) // a second replica of one primary
			default:
				hasReplica[n.MasterID] = true
			}
		}
		for _, n := range nodes {
			switch {
			case n.Master && len(n.Slots) > 0 && !hasReplica[n.ID]:
				orphans = append(orphans, n)
			case n.Master && len(n.Slots) == 0:
				spare = append(spare, n)
			}
		}
		if len(orphans) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("primaries without a replica after 30s: %+v\nredis-cli said:\n%s", orphans, createOut)
		}
		for i := 0; i < len(orphans) && i < len(spare); i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			cl := redis.NewClient(&redis.Options{Addr: spare[i].Addr})
			cl.Do(ctx, "CLUSTER", "REPLICATE", orphans[i].ID) //nolint:errcheck // retried until the topology is right
			cl.Close()
			cancel()
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Client returns a ClusterClient seeded with every node, closed when the test
// ends. opt may be nil; its Addrs are replaced.
func (c *Cluster) Client(t testing.TB, opt *redis.ClusterOptions) *redis.ClusterClient {
	t.Helper()
	if opt == nil {
		opt = &redis.ClusterOptions{}
	}
	o := *opt
	o.Addrs = append([]string(nil), c.Addrs...)
	cc := redis.NewClusterClient(&o)
	t.Cleanup(func() { cc.Close() })
	return cc
}

// Node returns the Server listening on addr, or nil.
func (c *Cluster) Node(addr string) *Server {
	for _, s := range c.Nodes {
		if s.Addr == addr {
			return s
		}
	}
	return nil
}

// Alive reports whether the node's process still answers on its port.
func (s *Server) Alive() bool { return portOpen(s.Addr) }

// ClusterNode is one line of CLUSTER NODES as seen by a live node.
type ClusterNode struct {
	ID, Addr, MasterID string
	Master, Failed     bool
	Slots              [][2]int // inclusive ranges, primaries only
}

// Topology returns CLUSTER NODES as seen by the first live node.
func (c *Cluster) Topology(ctx context.Context) ([]ClusterNode, error) {
	var lastErr error = fmt.Errorf("no live node")
	for _, s := range c.Nodes {
		if !s.Alive() {
			continue
		}
		nodes, err := clusterNodes(ctx, s.Addr)
		if err == nil {
			return nodes, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func clusterNodes(ctx context.Context, addr string) ([]ClusterNode, error) {
	cl := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer cl.Close()
	text, err := cl.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	var nodes []ClusterNode
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		n := ClusterNode{ID: f[0], MasterID: f[3]}
		n.Addr = f[1]
		if i := strings.IndexByte(n.Addr, '@'); i >= 0 {
			n.Addr = n.Addr[:i]
		}
		flags := "," + f[2] + ","
		n.Master = strings.Contains(flags, ",master,")
		n.Failed = strings.Contains(flags, ",fail,") || strings.Contains(flags, ",fail?,")
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot being migrated
			}
			lo, hi, found := strings.Cut(r, "-")
			if !found {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil {
				n.Slots = append(n.Slots, [2]int{a, b})
			}
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// mustTopology reads the cluster's nodes, failing the test if it cannot.
func (c *Cluster) mustTopology(t testing.TB) []ClusterNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nodes, err := c.Topology(ctx)
	if err != nil {
		t.Fatalf("cluster nodes: %v", err)
	}
	return nodes
}

// Primaries returns the live primaries that own slots, sorted by address.
func (c *Cluster) Primaries(t testing.TB) []*Server {
	t.Helper()
	nodes := c.mustTopology(t)
	var out []*Server
	for _, n := range nodes {
		if n.Master && !n.Failed && len(n.Slots) > 0 {
			if s := c.Node(n.Addr); s != nil {
				out = append(out, s)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out
}

// PrimaryFor returns the node that currently owns key's slot.
func (c *Cluster) PrimaryFor(t testing.TB, key string) *Server {
	t.Helper()
	nodes := c.mustTopology(t)
	slot := KeySlot(key)
	for _, n := range nodes {
		if !n.Master || n.Failed {
			continue
		}
		for _, r := range n.Slots {
			if slot >= r[0] && slot <= r[1] {
				if s := c.Node(n.Addr); s != nil {
					return s
				}
			}
		}
	}
	t.Fatalf("no live primary owns slot %d of %q", slot, key)
	return nil
}

// WaitHealthy waits until every live node reports cluster_state:ok with all
// 16384 slots ok, every slot is owned by a live primary in every live node's
// view, and every live replica's link to its primary is up.
func (c *Cluster) WaitHealthy(t testing.TB, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var why error
	for time.Now().Before(deadline) {
		why = c.healthy()
		if why == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("cluster not healthy after %v: %v", timeout, why)
}

func (c *Cluster) healthy() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, s := range c.Nodes {
		if !s.Alive() {
			continue
		}
		cl := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		info, err := cl.ClusterInfo(ctx).Result()
		if err == nil && !strings.Contains(info, "cluster_state:ok") {
			err = fmt.Errorf("%s: cluster_state not ok", s.Addr)
		}
		if err == nil && !strings.Contains(info, "cluster_slots_ok:16384") {
			err = fmt.Errorf("%s: not all slots ok", s.Addr)
		}
		var repl string
		if err == nil {
			repl, err = cl.Info(ctx, "replication").Result()
		}
		cl.Close()
		if err != nil {
			return err
		}
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			return fmt.Errorf("%s: replica link not up", s.Addr)
		}
		nodes, err := clusterNodes(ctx, s.Addr)
		if err != nil {
			return err
		}
		covered := 0
		for _, n := range nodes {
			if !n.Master || len(n.Slots) == 0 {
				continue
			}
			if n.Failed || (c.Node(n.Addr) != nil && !c.Node(n.Addr).Alive()) {
				return fmt.Errorf("%s sees dead primary %s still owning slots", s.Addr, n.Addr)
			}
			for _, r := range n.Slots {
				covered += r[1] - r[0] + 1
			}
		}
		if covered != 16384 {
			return fmt.Errorf("%s sees %d slots covered", s.Addr, covered)
		}
	}
	return nil
}

// KeysPerPrimary returns DBSIZE of every live primary, by address.
func (c *Cluster) KeysPerPrimary(t testing.TB) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range c.Primaries(t) {
		cl := redis.NewClient(&redis.Options{Addr: s.Addr})
		n, err := cl.DBSize(ctx).Result()
		cl.Close()
		if err != nil {
			t.Fatalf("dbsize %s: %v", s.Addr, err)
		}
		out[s.Addr] = n
	}
	return out
}

// ClusterInfoSum adds up one numeric CLUSTER INFO field (for example
// "cluster_stats_messages_publish_received") over every live node.
func (c *Cluster) ClusterInfoSum(t testing.TB, field string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var sum int64
	for _, s := range c.Nodes {
		if !s.Alive() {
			continue
		}
		cl := redis.NewClient(&redis.Options{Addr: s.Addr})
		info, err := cl.ClusterInfo(ctx).Result()
		cl.Close()
		if err != nil {
			t.Fatalf("cluster info %s: %v", s.Addr, err)
		}
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				sum += n
			}
		}
	}
	return sum
}

// KeySlot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of the key,
// or of its first non-empty {hash tag}, modulo 16384.
func KeySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// MigrateSlot moves one slot from primary src to primary dst the way
// `redis-cli --cluster reshard` does (SETSLOT IMPORTING/MIGRATING, MIGRATE
// the keys batch at a time, pause apart, SETSLOT NODE on every primary),
// so clients see ASK, TRYAGAIN and then MOVED. It returns the number of
// keys moved.
func (c *Cluster) MigrateSlot(t testing.TB, slot int, src, dst *Server, batch int, pause time.Duration) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := redis.NewClient(&redis.Options{Addr: src.Addr})
	defer s.Close()
	d := redis.NewClient(&redis.Options{Addr: dst.Addr})
	defer d.Close()
	srcID, err := s.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatalf("cluster myid %s: %v", src.Addr, err)
	}
	dstID, err := d.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatalf("cluster myid %s: %v", dst.Addr, err)
	}
	if err := d.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err(); err != nil {
		t.Fatalf("setslot importing: %v", err)
	}
	if err := s.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err(); err != nil {
		t.Fatalf("setslot migrating: %v", err)
	}
	moved := 0
	for {
		keys, err := s.ClusterGetKeysInSlot(ctx, slot, batch).Result()
		if err != nil {
			t.Fatalf("getkeysinslot: %v", err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", "127.0.0.1", dst.Port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := s.Do(ctx, args...).Err(); err != nil && err.Error() != "NOKEY" {
			t.Fatalf("migrate: %v", err)
		}
		moved += len(keys)
		time.Sleep(pause)
	}
	// The new owner first, then the old one, then everyone else.
	order := []*Server{dst, src}
	for _, p := range c.Primaries(t) {
		if p != dst && p != src {
			order = append(order, p)
		}
	}
	for _, p := range order {
		cl := redis.NewClient(&redis.Options{Addr: p.Addr})
		err := cl.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err()
		cl.Close()
		if err != nil {
			t.Fatalf("setslot node on %s: %v", p.Addr, err)
		}
	}
	c.waitSlotOwner(t, slot, dst.Addr, 20*time.Second)
	return moved
}

// waitSlotOwner waits until every live node names owner as the owner of slot.
func (c *Cluster) waitSlotOwner(t testing.TB, slot int, owner string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		agreed := true
		for _, s := range c.Nodes {
			if !s.Alive() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			nodes, err := clusterNodes(ctx, s.Addr)
			cancel()
			if err != nil || slotOwner(nodes, slot) != owner {
				agreed = false
				break
			}
		}
		if agreed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes do not agree that %s owns slot %d after %v", owner, slot, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func slotOwner(nodes []ClusterNode, slot int) string {
	for _, n := range nodes {
		if !n.Master {
			continue
		}
		for _, r := range n.Slots {
			if slot >= r[0] && slot <= r[1] {
				return n.Addr
			}
		}
	}
	return ""
}

// ReplicaOf returns a live replica of primary, waiting up to 10 s for the
// other nodes to know of one, or nil.
func (c *Cluster) ReplicaOf(t testing.TB, primary *Server) *Server {
	t.Helper()
	// A replica's attachment reaches the other nodes by gossip: on a loaded
	// machine, some time after the cluster says it is up.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if s := c.replicaNow(t, primary); s != nil || time.Now().After(deadline) {
			return s
		}
	}
}

func (c *Cluster) replicaNow(t testing.TB, primary *Server) *Server {
	nodes := c.mustTopology(t)
	var id string
	for _, n := range nodes {
		if n.Addr == primary.Addr {
			id = n.ID
		}
	}
	for _, n := range nodes {
		if n.MasterID == id && id != "" && !n.Failed {
			if s := c.Node(n.Addr); s != nil && s.Alive() {
				return s
			}
		}
	}
	return nil
}

// ReplicationLag returns how many bytes of primary's replication stream
// replica has not acknowledged yet (master_repl_offset minus the replica's
// slave_repl_offset).
func ReplicationLag(ctx context.Context, primary, replica *Server) (int64, error) {
	off := func(s *Server, field string) (int64, error) {
		cl := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		defer cl.Close()
		info, err := cl.Info(ctx, "replication").Result()
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
				return strconv.ParseInt(v, 10, 64)
			}
		}
		return 0, fmt.Errorf("%s: no %s in INFO replication", s.Addr, field)
	}
	r, err := off(replica, "slave_repl_offset")
	if err != nil {
		return 0, err
	}
	p, err := off(primary, "master_repl_offset")
	if err != nil {
		return 0, err
	}
	return p - r, nil
}

// StallReplication stops primary's replication: it forbids PSYNC, SYNC and
// REPLCONF to the default user (which replicas log in as) and closes the
// replica links. Replicas keep retrying and failing, so every write made from
// then on exists only on the primary: killing it loses them, the worst case
// of asynchronous replication. Clients are unaffected.
func StallReplication(ctx context.Context, primary *Server) error {
	cl := redis.NewClient(&redis.Options{Addr: primary.Addr, MaxRetries: -1})
	defer cl.Close()
	if err := cl.Do(ctx, "ACL", "SETUSER", "default", "-psync", "-sync", "-replconf").Err(); err != nil {
		return err
	}
	return cl.ClientKillByFilter(ctx, "TYPE", "replica").Err()
}
