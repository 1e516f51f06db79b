// Command bench runs fairlock and the locks users would pick instead (bsm/redislock,
// redsync, etcd's concurrency.Mutex, a naive SET NX PX spin) through the same
// scenarios against one redis-server (and one etcd), and fairlock's Semaphore
// and RWMutex against a naive spinning semaphore and read-write lock, and
// writes results.json, results.md, chart.svg and the plots (*.png). run.sh
// starts the servers.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

type Meta struct {
	Date         string   `json:"date"`
	Nproc        int      `json:"nproc"`
	CPU          string   `json:"cpu"`
	GoVersion    string   `json:"go_version"`
	RedisVersion string   `json:"redis_version"`
	EtcdVersion  string   `json:"etcd_version"`
	LoadAvg      string   `json:"loadavg_at_start"`
	Args         []string `json:"args"`
	LeaseTTL     string   `json:"lease_ttl"`
	Spin         string   `json:"spin"`
	Settings     []string `json:"peer_settings"`
	ElapsedS     float64  `json:"elapsed_s"`
}

type Results struct {
	Meta        Meta                `json:"meta"`
	Limit       *LimitResult        `json:"limit,omitempty"`
	Uncontended []UncontendedResult `json:"uncontended,omitempty"`
	Contended   []ContendedResult   `json:"contended,omitempty"`
	FIFO        []FIFOResult        `json:"fifo,omitempty"`
	Scale       []ScaleResult       `json:"scale,omitempty"`
	Semaphore   []KindResult        `json:"semaphore,omitempty"`
	RWMutex     []KindResult        `json:"rwmutex,omitempty"`
	// SideBySide is BenchmarkSideBySide's figures, run after the
	// uncontended row.
	SideBySide *SideBySideResult `json:"side_by_side,omitempty"`
	// Names is the many-names row: workers on names of their own, one
	// shared client per peer; NamesSideBySide is
	// BenchmarkSideBySideManyNames's figures, run right after it.
	Names           []NamesResult          `json:"names,omitempty"`
	NamesSideBySide *NamesSideBySideResult `json:"names_side_by_side,omitempty"`
	// Idle is the scale row's idle part: leases and waiters kept while
	// nothing is acquired or released.
	Idle []IdleResult `json:"idle,omitempty"`
	// SemaphoreDrain is the scale scenario's one-name drain on a semaphore.
	SemaphoreDrain []ScaleResult `json:"semaphore_drain,omitempty"`
	// Weighted is the semaphore with one big request among small ones.
	Weighted []KindResult `json:"weighted,omitempty"`
	// Tenants is the semaphore shared by tenants of unequal demand.
	Tenants []KindResult `json:"tenants,omitempty"`
	// WeightedTenants is the semaphore shared by tenants of unequal
	// weights (fairlock only).
	WeightedTenants []KindResult `json:"weighted_tenants,omitempty"`
	// PriorityLanes is the semaphore shared by a batch backlog and
	// interactive requests, with priorities and without (fairlock only).
	PriorityLanes []KindResult `json:"priority_lanes,omitempty"`
	Baseline      *Baseline    `json:"baseline,omitempty"`
	Targets       []Target     `json:"targets,omitempty"`
}

// Baseline is what an earlier run measured of the paths issue 9 says must
// not get slower: fairlock's FIFO hand-off and its largest one-name drain.
type Baseline struct {
	Date             string  `json:"date"`
	FIFOPerHandoffus float64 `json:"fifo_per_handoff_us,omitempty"`
	DrainWaiters     int     `json:"drain_waiters,omitempty"`
	DrainPerGrantus  float64 `json:"drain_per_grant_us,omitempty"`
}

// loadBaseline reads the fairlock figures of the run in a results.json.
func loadBaseline(path string) (*Baseline, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var old Results
	if err := json.Unmarshal(b, &old); err != nil {
		return nil, err
	}
	base := &Baseline{Date: old.Meta.Date}
	for _, f := range old.FIFO {
		if f.Peer == "fairlock" && f.Note == "" {
			base.FIFOPerHandoffus = f.PerHandoffus
		}
	}
	for _, s := range old.Scale {
		if s.Peer == "fairlock" && s.Names == 1 && s.Waiters > base.DrainWaiters {
			base.DrainWaiters, base.DrainPerGrantus = s.Waiters, s.PerGrantus
		}
	}
	return base, nil
}

// mustLoadBaseline is loadBaseline, fatal if the file cannot be read.
func mustLoadBaseline(path string) *Baseline {
	base, err := loadBaseline(path)
	if err != nil {
		log.Fatalf("baseline: %v", err)
	}
	return base
}

func main() {
	c := newConfig(flag.CommandLine)
	flag.Parse()
	switch {
	case c.built:
		printBuilt()
		return
	case c.freeport:
		printFreePort()
		return
	case c.child.on:
		runChild(c)
		return
	case c.reportOnly:
		reportOnly(c)
		return
	}
	if c.cpuprofile != "" {
		defer startCPUProfile(c.cpuprofile)()
	}
	b := newBench(c)
	want := nameSet(c.scenarios)
	for _, s := range scenarios {
		if want[s.name] {
			s.run(b)
			b.flush() // a run cut short keeps the rows measured so far
		}
	}
	b.flush()
	b.logf("wrote %s/results.{json,md}, chart.svg and the plots", c.out)
	printTargets(os.Stdout, b.res.Targets)
}

// printBuilt tells run.sh whether this binary runs the fairlock peer.
func printBuilt() {
	if fairlockBuilt {
		fmt.Println("yes")
	} else {
		fmt.Println("no")
	}
}

// printFreePort prints a loopback port free at the moment, for run.sh's
// servers.
func printFreePort() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
}

// runChild is a worker process of contended-mp.
func runChild(c *config) {
	p, _ := peerByName(c.peers)
	if err := childMain(p, c.env(), c.child.workers, c.child.idBase, c.child.name, c.cont.hold); err != nil {
		log.Fatalf("child: %v", err)
	}
}

// reportOnly re-renders the results in -out from their results.json,
// against -baseline if given (else the baseline the run had).
func reportOnly(c *config) {
	b, err := os.ReadFile(filepath.Join(c.out, "results.json"))
	if err != nil {
		log.Fatal(err)
	}
	var res Results
	if err := json.Unmarshal(b, &res); err != nil {
		log.Fatal(err)
	}
	if c.baseline != "" {
		res.Baseline = mustLoadBaseline(c.baseline)
	}
	res.Targets = evalTargets(&res)
	writeAll(c.out, &res)
}

// startCPUProfile starts writing a CPU profile to path; the func it
// returns stops it.
func startCPUProfile(path string) (stop func()) {
	f, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	pprof.StartCPUProfile(f)
	return pprof.StopCPUProfile
}

// printTargets writes the targets, met or missed, one a line: the end of
// run.sh's output.
func printTargets(w io.Writer, ts []Target) {
	met, na := tally(ts)
	fmt.Fprintf(w, "targets: %d of %d met", met, len(ts)-na)
	if na > 0 {
		fmt.Fprintf(w, ", %d not evaluated", na)
	}
	fmt.Fprintln(w)
	for _, t := range ts {
		mark := "MISSED"
		switch {
		case t.NA:
			mark = "n/a   "
		case t.Met:
			mark = "met   "
		}
		fmt.Fprintf(w, "%s  %s: %s: %s\n", mark, t.Area, t.Target, t.Value)
	}
}

// peerNamed tells whether peers has one called name.
func peerNamed(peers []peer, name string) bool {
	for _, p := range peers {
		if p.Name == name {
			return true
		}
	}
	return false
}

// nameSet is the set of names in a comma-separated list.
func nameSet(list string) map[string]bool {
	m := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		m[strings.TrimSpace(n)] = true
	}
	return m
}

// counts parses a comma-separated list of positive counts, skipping the rest.
func counts(list string) []int {
	var out []int
	for _, s := range strings.Split(list, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

func meta(mon *monitor, e *env, peers []peer) Meta {
	m := Meta{
		Date:      time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		Nproc:     runtime.NumCPU(),
		GoVersion: runtime.Version(),
		Args:      userArgs(os.Args[1:]),
		LeaseTTL:  e.LeaseTTL.String(),
		Spin:      e.SpinDelay.String(),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	m.RedisVersion = mon.serverInfo(context.Background(), "redis_version")
	if e.EtcdEndpoint != "" {
		if o, err := exec.Command("etcd", "--version").Output(); err == nil {
			m.EtcdVersion = strings.TrimPrefix(strings.SplitN(string(o), "\n", 2)[0], "etcd Version: ")
		}
	}
	for _, p := range peers {
		m.Settings = append(m.Settings, p.Name+": "+p.Settings)
		if p.KindSettings != "" {
			m.Settings = append(m.Settings, p.Name+" (semaphore, read-write lock): "+p.KindSettings)
		}
	}
	return m
}

// userArgs drops the flags run.sh sets for this machine (addresses, PIDs,
// paths), keeping those that change what is measured.
func userArgs(args []string) []string {
	drop := map[string]bool{"redis": true, "etcd": true, "etcd-pid": true, "out": true, "cpuprofile": true, "baseline": true}
	var out []string
	for i := 0; i < len(args); i++ {
		a := strings.TrimLeft(args[i], "-")
		name, _, hasValue := strings.Cut(a, "=")
		if drop[name] {
			if !hasValue {
				i++ // the value is the next argument
			}
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// warm keeps two clients busy with PINGs for d: on this VM the first
// seconds after an idle spell run markedly slower, which would count against
// whichever peer runs first.
func warm(e *env, d time.Duration) {
	ctx := context.Background()
	end := time.Now().Add(d)
	done := make(chan struct{})
	for i := 0; i < 2; i++ {
		go func() {
			defer func() { done <- struct{}{} }()
			cl := newRedisClient(e.RedisAddr, nil)
			defer cl.Close()
			for time.Now().Before(end) {
				cl.Ping(ctx)
			}
		}()
	}
	<-done
	<-done
}
