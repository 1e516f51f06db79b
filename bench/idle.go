package main

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"
)

// IdleResult is one case of the scale row's idle part: what it costs Redis
// to keep count leases (held by one client) or count waiters (of one
// client, queued on one name behind another client's lease) while nothing
// is acquired or released, over a window of a few heartbeat periods.
type IdleResult struct {
	Peer  string `json:"peer"`
	Case  string `json:"case"` // "leases", "waiters" or "none" (Redis with no client)
	Count int    `json:"count"`
	// Heartbeat is the client's heartbeat period, if it has one.
	Heartbeat string  `json:"heartbeat,omitempty"`
	SetupMs   float64 `json:"setup_ms"` // taking the leases, or queueing the waiters
	WindowS   float64 `json:"window_s"` // the idle window measured
	SettleS   float64 `json:"settle_s"` // waited after the setup, before the window
	CmdsPerS  float64 `json:"cmds_per_s"`
	CPUPct    float64 `json:"redis_cpu_pct_of_core"` // used_cpu_sys+user over the window, % of one core
	RTPerS    float64 `json:"client_round_trips_per_s"`
	UsedMemDB int64   `json:"used_memory_delta"`   // Redis used_memory after the setup − before
	MemPer    float64 `json:"used_memory_per_one"` // … per lease or waiter
	HeapPer   float64 `json:"client_heap_per_one"` // client HeapAlloc delta per lease or waiter (after GC)
	StackPer  float64 `json:"client_stack_per_one"`
	// Cmdstats are Redis's commands per second in the window, by command.
	Cmdstats    map[string]float64 `json:"cmdstats_per_s,omitempty"`
	ClientCalls map[string]int64   `json:"client_calls,omitempty"`
	Note        string             `json:"note,omitempty"`
}

// heartbeater is a worker with a heartbeat period (fairlock's Locker).
type heartbeater interface{ Heartbeat() time.Duration }

// idleWindow measures the server and client counters over d.
func idleWindow(r *IdleResult, mon *monitor, c *counters, d time.Duration) {
	ctx := context.Background()
	s0, _ := mon.snap(ctx)
	c0 := c.snap()
	t0 := mono()
	time.Sleep(d)
	el := float64(mono()-t0) / 1e9
	s1, _ := mon.snap(ctx)
	cs := c.snap().sub(c0)
	sd := diffServer(s0, s1)
	r.WindowS = el
	r.CmdsPerS = float64(sd.Commands) / el
	r.CPUPct = 100 * float64(sd.CPUus) / (el * 1e6)
	r.RTPerS = float64(cs.RoundTrips) / el
	r.Cmdstats = map[string]float64{}
	for k, v := range sd.Cmdstats {
		r.Cmdstats[k] = float64(v) / el
	}
	r.ClientCalls = cs.Names
}

// memBase is the client's heap and stack after a few collections.
func memBase() (heap, stack int64) {
	for range 3 {
		runtime.GC()
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc), int64(m.StackInuse)
}

// runIdleNone is Redis alone over d: its own background work (serverCron),
// the floor under every case.
func runIdleNone(mon *monitor, d time.Duration) IdleResult {
	r := IdleResult{Peer: "-", Case: "none"}
	idleWindow(&r, mon, &counters{}, d)
	return r
}

// runIdleLeases takes count leases on as many names with one worker (for
// fairlock one Locker), waits settle, then measures an idle window of d.
func runIdleLeases(p peer, e *env, mon *monitor, count int, settle, d time.Duration) IdleResult {
	r := IdleResult{Peer: p.Name, Case: "leases", Count: count, SettleS: settle.Seconds()}
	set, err := newWorkerSet(p, e, 1)
	if err != nil {
		r.Note = "setup: " + err.Error()
		return r
	}
	defer set.close()
	w := set.ws[0]
	if h, ok := w.(heartbeater); ok {
		r.Heartbeat = h.Heartbeat().String()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	heap0, stack0 := memBase()
	m0, _ := mon.snap(ctx)
	unlocks := make([]unlockFunc, 0, count)
	t0 := mono()
	for i := range count {
		u, err := w.Lock(ctx, "idle-lease-"+strconv.Itoa(i))
		if err != nil {
			r.Note = "lock: " + err.Error()
			break
		}
		unlocks = append(unlocks, u)
	}
	r.SetupMs = float64(mono()-t0) / 1e6
	defer func() {
		for _, u := range unlocks {
			u(ctx)
		}
	}()
	if len(unlocks) < count {
		return r
	}
	time.Sleep(settle)
	idleMem(&r, mon, heap0, stack0, m0, count)
	idleWindow(&r, mon, set.c, d)
	return r
}

// runIdleWaiters queues count waiters of one worker (for fairlock one
// Locker) on one name behind a lease of another, waits until all are
// queued and then settle, and measures an idle window of d. The holder's
// own upkeep is in the figures: a name with waiters has a holder.
func runIdleWaiters(p peer, e *env, mon *monitor, count int, settle, d time.Duration) IdleResult {
	r := IdleResult{Peer: p.Name, Case: "waiters", Count: count, SettleS: settle.Seconds()}
	if !p.Concurrent {
		r.Note = "skipped: one client cannot run concurrent waiters"
		return r
	}
	set, err := newWorkerSet(p, e, 2)
	if err != nil {
		r.Note = "setup: " + err.Error()
		return r
	}
	defer set.close()
	// An uncounted probe tells when every waiter is queued.
	probe, err := p.New(e, &counters{})
	if err != nil {
		r.Note = "probe: " + err.Error()
		return r
	}
	defer probe.Close()
	holder, w := set.ws[0], set.ws[1]
	if h, ok := w.(heartbeater); ok {
		r.Heartbeat = h.Heartbeat().String()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	name := "idle-waiters-" + strconv.Itoa(count)
	hu, err := holder.Lock(ctx, name)
	if err != nil {
		r.Note = "holder: " + err.Error()
		return r
	}
	heap0, stack0 := memBase()
	m0, _ := mon.snap(ctx)
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t0 := mono()
	for range count {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if u, err := w.Lock(wctx, name); err == nil {
				u(ctx) // not expected: the holder keeps the lock until the end
			}
		}()
	}
	defer func() {
		stop()
		wg.Wait()
		hu(ctx)
	}()
	if q, ok := probe.(queuedReporter); ok {
		for {
			n, err := q.Queued(ctx, name)
			if err != nil {
				r.Note = "inspect: " + err.Error()
				return r
			}
			if n >= count {
				break
			}
			if ctx.Err() != nil {
				r.Note = fmt.Sprintf("only %d of %d queued", n, count)
				return r
			}
			time.Sleep(5 * time.Millisecond)
		}
	} else {
		time.Sleep(200 * time.Millisecond) // a spinner cannot say when all wait
	}
	r.SetupMs = float64(mono()-t0) / 1e6
	time.Sleep(settle)
	idleMem(&r, mon, heap0, stack0, m0, count)
	idleWindow(&r, mon, set.c, d)
	return r
}

// idleMem fills the memory figures: Redis's used_memory and the client's
// heap and stacks now, against before the setup, per lease or waiter.
func idleMem(r *IdleResult, mon *monitor, heap0, stack0 int64, m0 serverSnap, count int) {
	heap1, stack1 := memBase()
	m1, _ := mon.snap(context.Background())
	r.UsedMemDB = m1.UsedMemory - m0.UsedMemory
	n := float64(max(count, 1))
	r.MemPer = float64(r.UsedMemDB) / n
	r.HeapPer = float64(heap1-heap0) / n
	r.StackPer = float64(stack1-stack0) / n
}
