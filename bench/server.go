package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// serverSnap is what Redis (and etcd, via /proc) say about themselves.
type serverSnap struct {
	Commands     int64            // total_commands_processed
	CPUus        int64            // used_cpu_sys + used_cpu_user, µs
	UsedMemory   int64            // used_memory
	Cmdstats     map[string]int64 // calls per command
	CmdUsec      map[string]int64 // usec per command
	EtcdCPUus    int64            // utime+stime of the etcd process, µs (10 ms ticks)
	monitorCalls int64
}

type monitor struct {
	cl      *redis.Client
	pingCl  *redis.Client // PoolSize 1, uncounted: local PING round trips
	c       *counters
	etcdPID int
}

func newMonitor(addr string, etcdPID int) *monitor {
	c := &counters{}
	return &monitor{cl: newRedisClient(addr, c), c: c, etcdPID: etcdPID,
		pingCl: redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})}
}

func (m *monitor) snap(ctx context.Context) (serverSnap, error) {
	s := serverSnap{Cmdstats: map[string]int64{}, CmdUsec: map[string]int64{}}
	s.monitorCalls = m.c.commands.Load()
	txt, err := m.cl.Info(ctx, "stats", "cpu", "memory", "commandstats").Result()
	if err != nil {
		return s, err
	}
	var sys, user float64
	for _, line := range strings.Split(txt, "\n") {
		line = strings.TrimSpace(line)
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "total_commands_processed":
			s.Commands, _ = strconv.ParseInt(v, 10, 64)
		case "used_cpu_sys":
			sys, _ = strconv.ParseFloat(v, 64)
		case "used_cpu_user":
			user, _ = strconv.ParseFloat(v, 64)
		case "used_memory":
			s.UsedMemory, _ = strconv.ParseInt(v, 10, 64)
		}
		if strings.HasPrefix(k, "cmdstat_") {
			// calls=1,usec=2,...
			for _, f := range strings.Split(v, ",") {
				if n, ok := strings.CutPrefix(f, "calls="); ok {
					s.Cmdstats[strings.TrimPrefix(k, "cmdstat_")], _ = strconv.ParseInt(n, 10, 64)
				}
				if n, ok := strings.CutPrefix(f, "usec="); ok {
					s.CmdUsec[strings.TrimPrefix(k, "cmdstat_")], _ = strconv.ParseInt(n, 10, 64)
				}
			}
		}
	}
	s.CPUus = int64((sys + user) * 1e6)
	if m.etcdPID > 0 {
		s.EtcdCPUus = procCPUus(m.etcdPID)
	}
	return s, nil
}

// delta of b over a, without the monitor's own commands.
type serverDelta struct {
	Commands  int64
	CPUus     int64
	EtcdCPUus int64
	Cmdstats  map[string]int64
	UsecPer   map[string]float64 // server µs per call, in this interval
}

func diffServer(a, b serverSnap) serverDelta {
	d := serverDelta{
		Commands:  b.Commands - a.Commands - (b.monitorCalls - a.monitorCalls),
		CPUus:     b.CPUus - a.CPUus,
		EtcdCPUus: b.EtcdCPUus - a.EtcdCPUus,
		Cmdstats:  map[string]int64{},
		UsecPer:   map[string]float64{},
	}
	for k, v := range b.Cmdstats {
		if x := v - a.Cmdstats[k]; x > 0 && k != "info" {
			d.Cmdstats[k] = x
			d.UsecPer[k] = float64(b.CmdUsec[k]-a.CmdUsec[k]) / float64(x)
		}
	}
	return d
}

// dropPings leaves n PINGs of the monitor's sampler out of the delta.
func (d *serverDelta) dropPings(n int64) {
	d.Commands -= n
	if d.Cmdstats["ping"] -= n; d.Cmdstats["ping"] <= 0 {
		delete(d.Cmdstats, "ping")
	}
}

func (m *monitor) pubsubClients(ctx context.Context) (int, error) {
	txt, err := m.cl.Do(ctx, "CLIENT", "LIST", "TYPE", "pubsub").Text()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range strings.Split(txt, "\n") {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	return n, nil
}

func (m *monitor) serverInfo(ctx context.Context, key string) string {
	txt, err := m.cl.Info(ctx, "server").Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(txt, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == key {
			return v
		}
	}
	return ""
}

// procCPUus reads utime+stime of a process from /proc (clock ticks of 10 ms).
func procCPUus(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	// fields after ')' start at field 3 (state); utime is field 14, stime 15.
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return (ut + st) * 10000 // CLK_TCK = 100 on Linux
}

// SlowEntry is one SLOWLOG entry (redis-server runs with
// slowlog-log-slower-than 1000 µs in run.sh).
type SlowEntry struct {
	Us  int64  `json:"us"`
	Cmd string `json:"cmd"`
}

func (m *monitor) slowlogReset(ctx context.Context) {
	m.cl.Do(ctx, "SLOWLOG", "RESET")
}

// slowlog returns up to n of the slowest entries since the last reset.
func (m *monitor) slowlog(ctx context.Context, n int) []SlowEntry {
	logs, err := m.cl.SlowLogGet(ctx, 128).Result()
	if err != nil {
		return nil
	}
	var out []SlowEntry
	for _, l := range logs {
		args := l.Args
		desc := strings.ToLower(strings.Join(args, " "))
		if len(args) > 1 && strings.EqualFold(args[0], "evalsha") {
			if sn, ok := scriptNames[args[1]]; ok {
				desc = "evalsha:" + sn
				n := len(args) - 2
				var more int
				if _, err := fmt.Sscanf(args[len(args)-1], "... (%d more arguments)", &more); err == nil {
					n += more - 1
				}
				if n > 0 {
					desc += fmt.Sprintf(" (%d args)", n)
				}
			}
		}
		if len(desc) > 80 {
			desc = desc[:80] + "…"
		}
		out = append(out, SlowEntry{Us: l.Duration.Microseconds(), Cmd: desc})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Us > out[j].Us })
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// localPing is the PING round trip p50 over d, taken right before a run, so
// that each row's latencies can be set against the load of its own moment.
// Its PINGs are subtracted from the server's command count by the caller
// taking it before the first snapshot.
func (m *monitor) localPing(ctx context.Context, d time.Duration) float64 {
	var lat []int64
	end := mono() + int64(d)
	for mono() < end {
		a := mono()
		if err := m.pingCl.Ping(ctx).Err(); err != nil {
			return 0
		}
		lat = append(lat, mono()-a)
	}
	return us(percentile(lat, 50))
}

// samplePings PINGs every interval on the PING connection until the stop
// it returns is called: the round trip under the run's own load and in
// the machine's state of the moment (on this VM the PING of an idle
// moment flips between about 8 and 60 µs from second to second). stop
// returns the p50 and the PINGs sent, which the caller subtracts from
// Redis's command count.
func (m *monitor) samplePings(interval time.Duration) (stop func() (p50us float64, n int64)) {
	done := make(chan struct{})
	result := make(chan []int64, 1)
	go func() {
		var lat []int64
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				result <- lat
				return
			case <-t.C:
			}
			a := mono()
			if err := m.pingCl.Ping(context.Background()).Err(); err == nil {
				lat = append(lat, mono()-a)
			}
		}
	}()
	return func() (float64, int64) {
		close(done)
		lat := <-result
		return us(percentile(lat, 50)), int64(len(lat))
	}
}
