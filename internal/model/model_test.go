package model

// The rule's own bounds, checked by simulating workers on the model: each
// worker asks for 1 permit, holds it for its hold, releases it and asks
// again after its pause. Time is the model's clock; a heartbeat (which
// scans every 750 ms) runs every second.

import (
	"container/heap"
	"fmt"
	"math"
	"testing"
	"time"
)

type worker struct {
	group  string
	weight int
	lane   int
	hold   time.Duration
	pause  time.Duration // between a release and its next request
	start  time.Duration // when it first asks
	stop   time.Duration // when it stops asking (0: never)
	aging  time.Duration // 0: the default

	asked   time.Duration // when its current request was made
	granted int
	used    time.Duration
	longest time.Duration // its longest wait
}

type event struct {
	at     time.Duration
	worker int
	ask    bool // else: its release
}

type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	if e[i].at != e[j].at {
		return e[i].at < e[j].at
	}
	return !e[i].ask && e[j].ask // releases first
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

const simEpoch = 1_800_000_000_000_000 // µs

// sim runs workers on a lock of capacity until end, and returns the lock;
// onGrant, if set, sees each grant at its time.
func sim(t *testing.T, capacity int, workers []*worker, end time.Duration, onGrant func(at time.Duration, w *worker)) *Lock {
	t.Helper()
	l := New(capacity, 0)
	byToken := map[string]int{}
	var q events
	for i, w := range workers {
		heap.Push(&q, event{at: w.start, worker: i, ask: true})
	}
	seq := 0
	granted := func(at time.Duration, gs []Grant) {
		for _, g := range gs {
			i := byToken[g.Token]
			w := workers[i]
			w.granted++
			w.longest = max(w.longest, at-w.asked)
			if onGrant != nil {
				onGrant(at, w)
			}
			heap.Push(&q, event{at: at + w.hold, worker: i})
		}
	}
	nextBeat := time.Second
	for q.Len() > 0 {
		e := heap.Pop(&q).(event)
		if e.at > end {
			break
		}
		for nextBeat <= e.at {
			l.SetClock(simEpoch + nextBeat.Microseconds())
			granted(nextBeat, l.Heartbeat(1000))
			nextBeat += time.Second
		}
		l.SetClock(simEpoch + e.at.Microseconds())
		w := workers[e.worker]
		if e.ask {
			seq++
			aging := w.aging
			if aging == 0 {
				aging = DefaultAgingMs * time.Millisecond
			}
			r := Request{Token: fmt.Sprintf("s:%d", seq), Session: "s", Lane: w.lane, AgingMs: aging.Milliseconds(), Group: w.group, Weight: max(w.weight, 1), Permits: 1}
			byToken[r.Token] = e.worker
			w.asked = e.at
			_, gs, err := l.Acquire(r, true, 1000)
			if err != nil {
				t.Fatal(err)
			}
			granted(e.at, gs)
			continue
		}
		var token string
		for tok, i := range byToken {
			if i == e.worker && l.holds(tok) != nil {
				token = tok
			}
		}
		w.used += w.hold
		_, gs := l.Release(token)
		delete(byToken, token)
		granted(e.at, gs)
		if w.stop == 0 || e.at+w.pause < w.stop {
			heap.Push(&q, event{at: e.at + w.pause, worker: e.worker, ask: true})
		}
	}
	return l
}

// shares is each group's share of the permit-time its workers used.
func shares(workers []*worker) map[string]float64 {
	used := map[string]time.Duration{}
	var total time.Duration
	for _, w := range workers {
		used[w.group] += w.used
		total += w.used
	}
	out := map[string]float64{}
	for g, u := range used {
		out[g] = float64(u) / float64(total)
	}
	return out
}

func backlogged(group string, weight, n int, hold time.Duration) []*worker {
	var ws []*worker
	for range n {
		ws = append(ws, &worker{group: group, weight: weight, hold: hold})
	}
	return ws
}

// While every group is backlogged, each gets the share of the permit-time
// its weight gives it, within 10% of it, whatever its holds. Each group
// has more workers than its share of the permits: one whose workers all
// hold cannot use more (here holds end together, and 6 workers of the
// weight-4 group would hold 3 of the 8 permits, 37.5%).
func TestSharesFollowWeights(t *testing.T) {
	for _, tc := range []struct {
		name     string
		capacity int
		workers  []*worker
		want     map[string]float64
	}{
		{"weights 1:2:3:4 on 8 permits", 8, concat(backlogged("w1", 1, 10, 5*time.Millisecond), backlogged("w2", 2, 10, 5*time.Millisecond),
			backlogged("w3", 3, 10, 5*time.Millisecond), backlogged("w4", 4, 10, 5*time.Millisecond)),
			map[string]float64{"w1": 0.1, "w2": 0.2, "w3": 0.3, "w4": 0.4}},
		{"holds 2 ms and 8 ms on 4 permits", 4, concat(backlogged("short", 1, 6, 2*time.Millisecond), backlogged("long", 1, 6, 8*time.Millisecond)),
			map[string]float64{"short": 0.5, "long": 0.5}},
		{"weights 1:3 on 1 permit", 1, concat(backlogged("a", 1, 3, 3*time.Millisecond), backlogged("b", 3, 3, 3*time.Millisecond)),
			map[string]float64{"a": 0.25, "b": 0.75}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim(t, tc.capacity, tc.workers, 20*time.Second, nil)
			got := shares(tc.workers)
			for g, want := range tc.want {
				if off := math.Abs(got[g]-want) / want; off > 0.10 {
					t.Errorf("group %s: share %.3f, want %.3f within 10%% (%.1f%% off)", g, got[g], want, 100*off)
				}
			}
			t.Logf("shares %v", got)
		})
	}
}

func concat(parts ...[]*worker) []*worker {
	var out []*worker
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// A group that used more than its share keeps that debt: a tenant with
// one 40 ms job at a time against a backlogged tenant of 5 ms jobs, on 1
// permit, gets about half the permit-time, not 8 grants in 9 of it.
func TestDebtIsKept(t *testing.T) {
	ws := concat([]*worker{{group: "one-job", hold: 40 * time.Millisecond, pause: 100 * time.Microsecond}}, backlogged("busy", 1, 4, 5*time.Millisecond))
	sim(t, 1, ws, 20*time.Second, nil)
	got := shares(ws)
	t.Logf("shares %v", got)
	if math.Abs(got["one-job"]-0.5) > 0.05 {
		t.Errorf("the one-job tenant's share %.3f, want about half (0.45 to 0.55)", got["one-job"])
	}
}

// A group that comes back starts level with the waiting groups: from idle
// (away 10 s), or from a long job with an empty line (one 5 s hold). The
// other group, backlogged throughout, is never passed over for longer than
// a few of its holds.
func TestNoBankedCredit(t *testing.T) {
	for _, tc := range []struct {
		name string
		away []*worker
	}{
		{"back from idle", []*worker{{group: "a", hold: 5 * time.Millisecond, stop: 2 * time.Second}, {group: "a", hold: 5 * time.Millisecond, stop: 2 * time.Second},
			{group: "a", hold: 5 * time.Millisecond, start: 12 * time.Second}, {group: "a", hold: 5 * time.Millisecond, start: 12 * time.Second},
			{group: "a", hold: 5 * time.Millisecond, start: 12 * time.Second}, {group: "a", hold: 5 * time.Millisecond, start: 12 * time.Second}}},
		{"back from a long job", []*worker{{group: "a", hold: 5 * time.Second, stop: time.Second},
			{group: "a", hold: 5 * time.Millisecond, start: 5 * time.Second}, {group: "a", hold: 5 * time.Millisecond, start: 5 * time.Second},
			{group: "a", hold: 5 * time.Millisecond, start: 5 * time.Second}, {group: "a", hold: 5 * time.Millisecond, start: 5 * time.Second}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := backlogged("b", 1, 4, 5*time.Millisecond)
			var last, gap time.Duration
			sim(t, 4, append(tc.away, b...), 20*time.Second, func(at time.Duration, w *worker) {
				if w.group == "b" {
					gap, last = max(gap, at-last), at
				}
			})
			t.Logf("b's longest time without a grant: %v", gap)
			if gap > 50*time.Millisecond {
				t.Errorf("b went %v without a grant after a came back: a banked credit", gap)
			}
		})
	}
}

// Each lane's groups start level with the waiting groups of their own
// lane: a new priority-0 group that came while a priority-9 group held is
// served within a few grants once the priority-9 stream stops, however
// far the priority-9 group's clock ran.
func TestLaneClocksAreTheirOwn(t *testing.T) {
	ws := concat(
		[]*worker{{group: "p9", lane: 9, hold: 5 * time.Millisecond, stop: 3 * time.Second}, {group: "p9", lane: 9, hold: 5 * time.Millisecond, stop: 3 * time.Second}},
		backlogged("old", 1, 3, 5*time.Millisecond),
		[]*worker{{group: "new", hold: 5 * time.Millisecond, start: 2 * time.Second}},
	)
	var stopped time.Duration
	grantsToOld := 0
	sim(t, 2, ws, 5*time.Second, func(at time.Duration, w *worker) {
		switch {
		case w.group == "new" && stopped == 0 && at > 3*time.Second:
			stopped = at
		case w.group == "old" && at > 3*time.Second && stopped == 0:
			grantsToOld++
		}
	})
	t.Logf("after the priority-9 stream stopped, the old group got %d grants before the new one", grantsToOld)
	if grantsToOld > 4 {
		t.Errorf("the new priority-0 group waited behind %d grants to the old one: it started at another lane's clock", grantsToOld)
	}
}

// Aging bounds every wait with groups too: a waiter of priority q is
// granted within (9 − q) × d of its arrival, plus a hold and its group's
// turn, against a stream of priority 9 that never lets up: a new tenant's
// request, and a tenant's own request behind its priority-5 jobs.
func TestAgingBoundsWaitsWithGroups(t *testing.T) {
	const d, hold = 100 * time.Millisecond, 5 * time.Millisecond
	stream := func(group string, lane int) []*worker {
		var ws []*worker
		for range 4 {
			ws = append(ws, &worker{group: group, lane: lane, hold: hold, aging: d})
		}
		return ws
	}
	for _, tc := range []struct {
		name    string
		workers []*worker
		probe   *worker
	}{
		{"a new tenant's priority-0 request against a priority-9 stream", stream("x", 9),
			&worker{group: "y", hold: hold, aging: d, start: 2 * time.Second, stop: 2*time.Second + time.Millisecond}},
		{"a tenant's priority-0 request behind its own priority-5 jobs", concat(stream("t", 5), stream("x", 9)),
			&worker{group: "t", hold: hold, aging: d, start: 2 * time.Second, stop: 2*time.Second + time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim(t, 2, append(tc.workers, tc.probe), 6*time.Second, nil)
			bound := 9*d + 2*hold
			t.Logf("the priority-0 request waited %v (bound %v)", tc.probe.longest, bound)
			if tc.probe.granted == 0 || tc.probe.longest > bound {
				t.Errorf("the priority-0 request waited %v (granted %d times), past %v", tc.probe.longest, tc.probe.granted, bound)
			}
		})
	}
}

// A group with nothing held and nobody waiting leaves nothing behind but
// its debt, and at most IdleGroups debts are kept: 20,000 one-off groups
// through a semaphore that never goes idle leave the groups that hold or
// wait, plus at most IdleGroups debts.
func TestOneOffGroupsLeaveLittle(t *testing.T) {
	var ws []*worker
	const every = 2 * time.Millisecond // 500 a second, where 4 permits of 5 ms serve 800
	for i := range 20_000 {
		ws = append(ws, &worker{group: fmt.Sprintf("g%d", i), hold: 5 * time.Millisecond, start: time.Duration(i) * every,
			stop: time.Duration(i)*every + time.Millisecond})
	}
	ws = append(ws, backlogged("steady", 1, 4, 5*time.Millisecond)...)
	l := sim(t, 4, ws, 20_000*every, nil)
	v := l.View()
	active := map[string]bool{}
	for _, w := range v.Waiters {
		active[w.Group] = true
	}
	t.Logf("groups kept %d (holding or waiting %d), debts kept %d", len(v.Groups), len(active)+len(v.Holders), len(v.Idle))
	if len(v.Groups) > len(active)+len(v.Holders) {
		t.Errorf("%d groups kept, %d hold or wait", len(v.Groups), len(active)+len(v.Holders))
	}
	if len(v.Idle) > IdleGroups {
		t.Errorf("%d debts kept, more than %d", len(v.Idle), IdleGroups)
	}
}
