// Package redistest starts throwaway redis-server processes on free loopback
// ports for tests, and stops them when the test ends.
//
// The real-Redis tests are the proof of fairlock's claims, so CI sets
// FAIRLOCK_REQUIRE_REDIS=1: a missing redis-server then fails the test
// instead of skipping it.
package redistest

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RequireEnv is the environment variable that turns a missing redis-server
// from a skip into a failure.
const RequireEnv = "FAIRLOCK_REQUIRE_REDIS"

// Server is one redis-server process with no persistence.
type Server struct {
	Addr string
	Port int
	args []string
	dir  string
	cmd  *exec.Cmd
}

// Binary returns the path of redis-server, or skips (fails when RequireEnv
// is set) the test when it is not installed.
func Binary(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv(RequireEnv) != "" {
			t.Fatalf("redis-server not found and %s is set: %v", RequireEnv, err)
		}
		t.Skipf("redis-server not installed (set %s=1 to make this a failure)", RequireEnv)
	}
	return path
}

// Start launches a redis-server on a free loopback port. Extra args are
// passed to redis-server as "--name value" pairs. The server is killed when
// the test ends.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	s := &Server{args: args, dir: t.TempDir()}
	t.Cleanup(s.Kill)
	// Tests run side by side, in this process and in the other packages'
	// test binaries: a port free a moment ago may be another server's by
	// the time ours binds it. Then that one answers, and ours is started
	// again on another port.
	for tries := 1; ; tries++ {
		s.Port = FreePort(t)
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
		err := s.start(t)
		if err == nil {
			return s
		}
		if tries == 5 {
			t.Fatal(err)
		}
	}
}

// start launches the server on its port and waits until it answers. A
// server that cannot take its port is an error; one that does not answer
// ends the test.
func (s *Server) start(t testing.TB) error {
	t.Helper()
	argv := append([]string{
		"--port", strconv.Itoa(s.Port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--logfile", "redis.log",
	}, s.args...)
	s.cmd = exec.Command(Binary(t), argv...)
	dieWithTest(s.cmd)
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	go s.cmd.Wait() //nolint:errcheck // reaps the process; exit status is irrelevant
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		info, err := c.Info(ctx, "server").Result()
		cancel()
		if err == nil {
			if pid := infoField(info, "process_id"); pid != strconv.Itoa(s.PID()) {
				s.cmd.Process.Kill() //nolint:errcheck // it may have exited already
				return fmt.Errorf("redis-server on %s: another server (pid %s) answers there", s.Addr, pid)
			}
			return nil
		}
		if time.Now().After(deadline) {
			s.Kill()
			log, _ := os.ReadFile(s.dir + "/redis.log")
			t.Fatalf("redis-server on %s did not answer: %v\n%s", s.Addr, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mustStart starts the server again on its own port, as a restart does.
func (s *Server) mustStart(t testing.TB) {
	t.Helper()
	if err := s.start(t); err != nil {
		t.Fatal(err)
	}
}

// infoField is the value of field in an INFO reply.
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// Client returns a go-redis client for the server, closed when the test ends.
func (s *Server) Client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// Kill stops the server with SIGKILL, losing all its data.
func (s *Server) Kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill() //nolint:errcheck // already gone is fine
		for i := 0; i < 100 && portOpen(s.Addr); i++ {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// Restart kills the server and starts a fresh, empty one on the same port.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	s.mustStart(t)
}

// PID is the process id of the running server.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// FreePort returns a loopback TCP port that was free a moment ago, and
// that FreePort has not returned before in this process: a server killed
// to be restarted on its port must find it free.
func FreePort(t testing.TB) int {
	t.Helper()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if _, taken := issuedPorts.LoadOrStore(port, true); !taken {
			return port
		}
	}
}

var issuedPorts sync.Map

func portOpen(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 50*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// String names the server in test logs.
func (s *Server) String() string { return fmt.Sprintf("redis-server %s (pid %d)", s.Addr, s.PID()) }

// DefaultParallel makes n the number of tests that run side by side, unless
// the command line's -parallel says otherwise, or the race detector is on:
// for a TestMain, before m.Run. Tests that each have their own servers,
// and spend their time waiting on TTLs rather than on the CPU, gain from
// more than GOMAXPROCS; under -race, which makes the CPU-bound parts 5 to
// 10 times slower, they would crowd each other past their bounds, so
// GOMAXPROCS it stays.
func DefaultParallel(n int) {
	if !raceEnabled {
		FlagDefault("test.parallel", strconv.Itoa(n))
	}
}

// FlagDefault sets the flag called name to value unless the command line
// set it: for a TestMain, before m.Run and so before any test reads it.
func FlagDefault(name, value string) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == name })
	if !explicit {
		flag.Set(name, value) //nolint:errcheck // the caller names a flag that exists
	}
}

// A Subtest is a subtest's name and body, for SideBySide.
type Subtest struct {
	Name string
	Test func(t *testing.T)
}

// SideBySide runs subtests of t all at once, in the parallel slot that t
// holds, and returns when every one has. A subtest that called t.Parallel
// would instead wait for a slot behind every test not yet started, and so
// run last: a long one then ends its package's run (the state machine's
// three machines started 26 s into fairlock/'s 44 s that way).
func SideBySide(t *testing.T, subtests ...Subtest) {
	var wg sync.WaitGroup
	for _, st := range subtests {
		wg.Go(func() { t.Run(st.Name, st.Test) })
	}
	wg.Wait()
}

// LongRuns is the environment variable that asks, set to 1, for the long
// runs of the tests that sample a workload for a while (contention, the
// transfers, the Cluster's spread and throughput). CI sets it for the
// process scenarios on Redis 7.0, whose figures docs/faults.md quotes.
// Without it they sample less: the README's command (and CI's other runs)
// check the same promises over fewer samples.
const LongRuns = "FAIRLOCK_LONG"

// Long returns long when LongRuns asks for the long runs, else short.
func Long[T any](short, long T) T {
	if os.Getenv(LongRuns) == "1" {
		return long
	}
	return short
}

// SkipUnderRace skips t in a binary built with -race, for a scenario of
// many processes that each run a -race binary too: CI runs it without
// -race, on Redis 7.0, 8.0 and Valkey 8.1, and so does the README's test
// command. The library code it drives runs under -race in the in-process
// tests (fairlock/'s, and the root's Cluster, Sentinel and kinds tests).
// With the mutex's scenarios under -race, the root package ran for 158 s
// of the README command's 332 s (TestFault10_SlowNetwork alone 97 s).
func SkipUnderRace(t testing.TB) {
	t.Helper()
	if raceEnabled {
		t.Skip("many processes, each built with -race: run without it (CI's Redis 7.0, 8.0 and Valkey 8.1 runs, the README's command)")
	}
}
