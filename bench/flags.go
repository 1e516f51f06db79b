package main

import (
	"flag"
	"strings"
	"time"
)

// config holds every flag. The flags that every run reads are registered
// by commonFlags, each scenario's own by the flags function of its entry
// in scenarios, so that the table says what each scenario reads. A flag
// that a later scenario shares (-contended-hold, -sem-capacity, -sem-hold,
// -scale-peer-max) is registered by the first, and its usage names both.
type config struct {
	redisAddr, etcdEP string
	etcdPID           int
	peers, scenarios  string
	out               string
	lease, spin       time.Duration
	cpuprofile        string
	warmup            time.Duration
	reportOnly        bool
	baseline          string
	freeport, built   bool
	child             childConfig

	limitDur time.Duration
	unc      struct {
		dur                            time.Duration
		rounds, pool                   int
		background, fairlockBackground bool
		sideBySide, sideBySideTime     string
	}
	names struct {
		workers, rounds int
		dur             time.Duration
		sideBySideTime  string
		rueidis         bool
	}
	cont struct {
		workers   int
		hold, dur time.Duration
	}
	mp struct {
		procs, workers int
		dur            time.Duration
	}
	fifo struct {
		waiters, rounds int
		spacing, hold   time.Duration
	}
	scale struct {
		single, peers, idle     string
		names, perName, peerMax int
		idleDur, idleSettle     time.Duration
	}
	sem struct {
		capacity, workers int
		hold, dur         time.Duration
	}
	drain struct {
		counts, peers string
		grants        int
	}
	weighted struct {
		workers, big int
		dur          time.Duration
	}
	tenants struct {
		layout string
		dur    time.Duration
	}
	weightedTenants struct {
		layout, weights string
		capacity        int
		dur             time.Duration
	}
	rw struct {
		workers, readPct int
		seed             uint64
		hold, dur        time.Duration
	}

	priorityLanes laneConfig
}

// laneConfig is the priority-lanes scenario's shape: batch workers at
// priority 0 who ask again at once, interactive workers at maxPriority who
// pause after each release, on one semaphore of capacity; the aging of the
// row with priorities; the duration of each row.
type laneConfig struct {
	batch, interactive, capacity int
	pause, aging, dur            time.Duration
	// saturatedAging is the aging of the saturated row, where capacity+2
	// interactive workers ask again at once.
	saturatedAging time.Duration
}

// childConfig is what runContendedMP passes to the worker processes it
// starts (with -peers, -redis, -etcd, -lease, -spin and -contended-hold).
type childConfig struct {
	on              bool
	workers, idBase int
	name            string
}

// newConfig registers every flag on fs; their values are the config's
// once fs is parsed.
func newConfig(fs *flag.FlagSet) *config {
	c := &config{}
	c.commonFlags(fs)
	for _, s := range scenarios {
		s.flags(fs, c)
	}
	return c
}

// commonFlags registers the flags of the servers, the peers, the output
// and the modes other than a run (-freeport, -report-only, -child, ...).
func (c *config) commonFlags(fs *flag.FlagSet) {
	names := make([]string, len(scenarios))
	for i, s := range scenarios {
		names[i] = s.name
	}
	fs.StringVar(&c.redisAddr, "redis", "127.0.0.1:6379", "redis-server address")
	fs.StringVar(&c.etcdEP, "etcd", "", "etcd client URL (empty: skip etcd)")
	fs.IntVar(&c.etcdPID, "etcd-pid", 0, "etcd process id, for its CPU time from /proc")
	fs.StringVar(&c.peers, "peers", "fairlock,redislock,redsync,naive,etcd", "peers to run")
	fs.StringVar(&c.scenarios, "scenarios", strings.Join(names, ","), "scenarios to run")
	fs.StringVar(&c.out, "out", "results", "output directory")
	fs.DurationVar(&c.lease, "lease", 10*time.Second, "lease TTL / expiry for every peer")
	fs.DurationVar(&c.spin, "spin", time.Millisecond, "retry delay of the spinning peers")
	fs.StringVar(&c.cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run")
	fs.DurationVar(&c.warmup, "warmup", 3*time.Second, "load Redis and the CPUs this long before measuring (the first seconds after idle run slow here)")
	fs.BoolVar(&c.reportOnly, "report-only", false, "re-render results.md, chart.svg and the plots from results.json")
	fs.StringVar(&c.baseline, "baseline", "", "results.json of an earlier run: fairlock's FIFO hand-off and largest drain must be no slower than there (within 50%)")
	fs.BoolVar(&c.freeport, "freeport", false, "print a free loopback TCP port and exit")
	fs.BoolVar(&c.built, "fairlock-built", false, "print yes if fairlock is built into this binary, else no, and exit")

	fs.BoolVar(&c.child.on, "child", false, "internal: worker process of contended-mp")
	fs.IntVar(&c.child.workers, "child-workers", 4, "internal")
	fs.IntVar(&c.child.idBase, "child-idbase", 0, "internal")
	fs.StringVar(&c.child.name, "child-name", "", "internal")
}

// env is what every peer is made with.
func (c *config) env() *env {
	return &env{RedisAddr: c.redisAddr, EtcdEndpoint: c.etcdEP, SpinDelay: c.spin, LeaseTTL: c.lease}
}
