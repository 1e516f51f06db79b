package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the master name the Sentinel setup monitors.
const SentinelMaster = "fairlock"

// SentinelDownAfter is down-after-milliseconds of the Sentinel setup: the
// sentinels start a failover about this long after the primary stops
// answering, and finish it about a second later.
const SentinelDownAfter = 1000 * time.Millisecond

// Sentinels is one primary, one replica and three redis-sentinel processes
// (quorum 2) on loopback ports, all killed by PID when the test ends.
type Sentinels struct {
	Primary, Replica *Server
	Addrs            []string // the sentinels' addresses
	procs            []*exec.Cmd
}

// SentinelBinary returns the command that runs a sentinel: Debian's
// redis-sentinel (package redis-sentinel) when installed, else
// "redis-server --sentinel". It skips (fails when RequireEnv is set) when
// neither exists.
func SentinelBinary(t testing.TB) (path string, extra []string) {
	t.Helper()
	if p, err := exec.LookPath("redis-sentinel"); err == nil {
		return p, nil
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, []string{"--sentinel"}
	}
	if os.Getenv(RequireEnv) != "" {
		t.Fatalf("neither redis-sentinel nor redis-server found and %s is set (apt-get install redis-sentinel)", RequireEnv)
	}
	t.Skipf("redis-sentinel not installed (apt-get install redis-sentinel; set %s=1 to make this a failure)", RequireEnv)
	return "", nil
}

// StartSentinels starts a primary, its replica and three sentinels, and waits
// until the replica is in sync and every sentinel knows the replica and the
// two other sentinels, so that a failover can start at once.
func StartSentinels(t testing.TB) *Sentinels {
	t.Helper()
	bin, extra := SentinelBinary(t)
	// Sync the replica at once, not after the default 5 s wait.
	s := &Sentinels{Primary: Start(t, "--repl-diskless-sync-delay", "0")}
	s.Replica = Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(s.Primary.Port), "--repl-diskless-sync-delay", "0")
	for i := 0; i < 3; i++ {
		port := FreePort(t)
		dir := t.TempDir()
		conf := fmt.Sprintf(`port %d
bind 127.0.0.1
dir %s
logfile sentinel.log
sentinel monitor %s 127.0.0.1 %d 2
sentinel down-after-milliseconds %s %d
sentinel failover-timeout %s 10000
sentinel parallel-syncs %s 1
`, port, dir, SentinelMaster, s.Primary.Port, SentinelMaster, SentinelDownAfter.Milliseconds(), SentinelMaster, SentinelMaster)
		path := filepath.Join(dir, "sentinel.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, append([]string{path}, extra...)...)
		dieWithTest(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatalf("start sentinel: %v", err)
		}
		go cmd.Wait() //nolint:errcheck // reaps the process
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		t.Cleanup(func() {
			cmd.Process.Kill() //nolint:errcheck // already gone is fine
			for i := 0; i < 100 && portOpen(addr); i++ {
				time.Sleep(10 * time.Millisecond)
			}
		})
		s.procs = append(s.procs, cmd)
		s.Addrs = append(s.Addrs, addr)
	}
	deadline := time.Now().Add(30 * time.Second)
	var why error
	for time.Now().Before(deadline) {
		if why = s.ready(); why == nil {
			return s
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("sentinel setup not ready after 30s: %v", why)
	return nil
}

func (s *Sentinels) ready() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r := redis.NewClient(&redis.Options{Addr: s.Replica.Addr, MaxRetries: -1})
	repl, err := r.Info(ctx, "replication").Result()
	r.Close()
	if err != nil {
		return err
	}
	if !strings.Contains(repl, "master_link_status:up") {
		return fmt.Errorf("replica link not up")
	}
	for _, a := range s.Addrs {
		sc := redis.NewSentinelClient(&redis.Options{Addr: a, MaxRetries: -1})
		m, err := sc.Master(ctx, SentinelMaster).Result()
		if err == nil && (m["num-other-sentinels"] != "2" || m["num-slaves"] != "1") {
			err = fmt.Errorf("sentinel %s sees %s other sentinels, %s replicas", a, m["num-other-sentinels"], m["num-slaves"])
		}
		sc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// Client returns a Sentinel-backed failover client for the setup, closed when
// the test ends. opt may be nil; MasterName and SentinelAddrs are replaced.
func (s *Sentinels) Client(t testing.TB, opt *redis.FailoverOptions) *redis.Client {
	t.Helper()
	if opt == nil {
		opt = &redis.FailoverOptions{}
	}
	o := *opt
	o.MasterName = SentinelMaster
	o.SentinelAddrs = append([]string(nil), s.Addrs...)
	c := redis.NewFailoverClient(&o)
	t.Cleanup(func() { c.Close() })
	return c
}

// PrimaryAddr asks the sentinels (first that answers) for the current
// primary's address.
func (s *Sentinels) PrimaryAddr(ctx context.Context) (string, error) {
	var lastErr error
	for _, a := range s.Addrs {
		sc := redis.NewSentinelClient(&redis.Options{Addr: a, MaxRetries: -1})
		hp, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
		sc.Close()
		if err == nil && len(hp) == 2 {
			return net.JoinHostPort(hp[0], hp[1]), nil
		}
		lastErr = err
	}
	return "", fmt.Errorf("no sentinel answered: %v", lastErr)
}

// WaitPromoted waits until every sentinel names a primary other than old and
// that node answers as a primary; it returns the new primary's address.
func (s *Sentinels) WaitPromoted(t testing.TB, old string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		addr, agreed := "", true
		for _, a := range s.Addrs {
			sc := redis.NewSentinelClient(&redis.Options{Addr: a, MaxRetries: -1})
			hp, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
			sc.Close()
			if err != nil || len(hp) != 2 {
				agreed = false
				break
			}
			got := net.JoinHostPort(hp[0], hp[1])
			if got == old || (addr != "" && got != addr) {
				agreed = false
				break
			}
			addr = got
		}
		if agreed {
			c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
			repl, err := c.Info(ctx, "replication").Result()
			c.Close()
			if err == nil && strings.Contains(repl, "role:master") {
				cancel()
				return addr
			}
		}
		cancel()
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no sentinel failover away from %s within %v", old, timeout)
	return ""
}
