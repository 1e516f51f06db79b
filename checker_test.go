package fairlock_test

// A plain interval checker of lock histories.
//
// Every waiter (one Acquire call) contributes, from the events of its process:
//   call     before Acquire was called
//   queued   OnQueued fired: its enqueue had reached Redis (position given)
//   granted  Acquire returned a lease (fence)
//   rel      Release was called (stamped before the call; result in Err)
//   lost     the lease's Done closed with ErrLost
//   acqerr   Acquire returned an error
// plus the parent's kill/stop events for whole processes.
//
// Observed intervals are inside the real ones: a grant is seen after Redis
// made it, a release is stamped before Redis sees it. So if the real holds
// never overlap, the observed ones cannot either: the check has no false
// alarms from observation delay.

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"
)

// Waiter is one Acquire call, assembled from the history.
type Waiter struct {
	W, Proc   string
	Name      string // lock name
	Call      int64
	Queued    int64 // 0 if never queued (granted at once)
	Pos       int
	Granted   int64 // 0 if never granted
	Fence     int64
	End       int64 // release call, lost notice or kill; MaxInt64 if still held
	Lost      bool  // Redis or the library said the lease was lost
	AcqErr    string
	ProcFault bool // its process was killed or paused at some point
}

// entered is when the waiter's place in line was certainly taken.
func (w *Waiter) entered() int64 {
	if w.Queued != 0 {
		return w.Queued
	}
	return w.Granted
}

// CheckOpts tunes a check.
type CheckOpts struct {
	// HandoffBound is the allowance per position for hand-off on top of the
	// longest observed hold (starvation bound). 0 skips the starvation check.
	HandoffBound time.Duration
	// NoFIFO skips the FIFO check (waiters that could not stay alive).
	NoFIFO bool
}

// CheckResult is what a check found.
type CheckResult struct {
	Waiters      []*Waiter
	Grants       int
	Lost         int
	Violations   []string
	MaxHold      time.Duration
	Handoffs     []time.Duration // release call -> next grant, when the next one was waiting
	MaxStarveRat float64         // max over waiters of wait / (pos * (maxHold + handoff bound))
}

func (r *CheckResult) violate(format string, args ...any) {
	if len(r.Violations) < 20 {
		r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
	}
}

// HandoffStats returns p50, p99 and max of the hand-off latencies.
func (r *CheckResult) HandoffStats() (p50, p99, max time.Duration) {
	if len(r.Handoffs) == 0 {
		return
	}
	h := append([]time.Duration(nil), r.Handoffs...)
	sort.Slice(h, func(i, j int) bool { return h[i] < h[j] })
	return h[len(h)/2], h[len(h)*99/100], h[len(h)-1]
}

// BuildWaiters assembles waiters from a history.
func BuildWaiters(evs []Ev) []*Waiter {
	byW := map[string]*Waiter{}
	var order []*Waiter
	closing := map[string][]int64{} // proc -> times it began closing its Locker
	fault := map[string]int64{}     // proc -> first kill/stop
	killed := map[string]int64{}    // proc -> kill time
	for _, e := range evs {
		switch e.Kind {
		case "closing":
			closing[e.Proc] = append(closing[e.Proc], e.T)
		case "kill", "stop":
			if _, ok := fault[e.Proc]; !ok {
				fault[e.Proc] = e.T
			}
			if e.Kind == "kill" {
				killed[e.Proc] = e.T
			}
		}
		if e.W == "" {
			continue
		}
		w := byW[e.W]
		if w == nil {
			w = &Waiter{W: e.W, Proc: e.Proc, End: math.MaxInt64}
			byW[e.W] = w
			order = append(order, w)
		}
		switch e.Kind {
		case "call":
			w.Call, w.Name = e.T, e.L
		case "queued":
			// A waiter that lost its place queues anew at the back: its
			// last entry is the place that counts.
			w.Queued, w.Pos = e.T, e.Pos
		case "granted":
			w.Granted, w.Fence = e.T, e.Fence
		case "acqerr":
			w.AcqErr = e.Err
		case "rel":
			if w.End == math.MaxInt64 || e.T < w.End {
				w.End = e.T
			}
			if e.Err != "ok" && e.Err != "nolease" {
				w.Lost = true
			}
		case "lost":
			w.Lost = true
		}
	}
	for _, w := range order {
		if _, ok := fault[w.Proc]; ok {
			w.ProcFault = true
		}
		if kt, ok := killed[w.Proc]; ok && w.Granted != 0 && kt < w.End {
			w.End = kt // a killed process does nothing after its death
		}
		for _, ct := range closing[w.Proc] {
			if w.Granted != 0 && ct > w.Granted && ct < w.End {
				w.End = ct // Close releases held leases
			}
		}
	}
	return order
}

// Check verifies mutual exclusion, fence order, FIFO and no starvation,
// lock by lock.
func Check(evs []Ev, o CheckOpts) *CheckResult {
	all := BuildWaiters(evs)
	byName := map[string][]*Waiter{}
	var names []string
	for _, w := range all {
		if _, ok := byName[w.Name]; !ok {
			names = append(names, w.Name)
		}
		byName[w.Name] = append(byName[w.Name], w)
	}
	r := &CheckResult{Waiters: all}
	for _, n := range names {
		one := checkLock(evs, byName[n], o)
		r.Grants += one.Grants
		r.Lost += one.Lost
		r.MaxHold = max(r.MaxHold, one.MaxHold)
		r.Handoffs = append(r.Handoffs, one.Handoffs...)
		r.MaxStarveRat = max(r.MaxStarveRat, one.MaxStarveRat)
		for _, v := range one.Violations {
			r.violate("lock %q: %s", n, v)
		}
	}
	return r
}

func checkLock(evs []Ev, waiters []*Waiter, o CheckOpts) *CheckResult {
	r := &CheckResult{Waiters: waiters}
	var granted []*Waiter
	for _, w := range r.Waiters {
		if w.Granted != 0 {
			granted = append(granted, w)
			if w.Lost {
				r.Lost++
			}
			if w.End != math.MaxInt64 {
				if h := dur(w.End - w.Granted); h > r.MaxHold {
					r.MaxHold = h
				}
			}
		}
	}
	r.Grants = len(granted)
	sort.Slice(granted, func(i, j int) bool { return granted[i].Granted < granted[j].Granted })

	// Mutual exclusion: each grant must come after the end of every earlier
	// interval that was not provably lost. Track the latest end so far.
	var maxEnd int64
	var maxEndW *Waiter
	for _, w := range granted {
		if maxEndW != nil && w.Granted < maxEnd {
			r.violate("mutual exclusion: %s granted at %s while %s (fence %d) held [%s, %s]",
				w.W, rel(evs, w.Granted), maxEndW.W, maxEndW.Fence, rel(evs, maxEndW.Granted), relEnd(evs, maxEnd))
		}
		if !w.Lost && w.End > maxEnd {
			maxEnd, maxEndW = w.End, w
		}
	}

	// Fences: unique, and strictly increasing in grant order among leases that
	// were not lost (a lost lease may have seen its grant late).
	seen := map[int64]string{}
	var prev *Waiter
	for _, w := range granted {
		if other, dup := seen[w.Fence]; dup {
			r.violate("fence %d granted twice: %s and %s", w.Fence, other, w.W)
		}
		seen[w.Fence] = w.W
		if w.Lost {
			continue
		}
		if prev != nil && w.Fence <= prev.Fence {
			r.violate("fence order: %s got fence %d after %s got %d", w.W, w.Fence, prev.W, prev.Fence)
		}
		prev = w
	}

	// Hand-offs: from a release call to the next grant, when the next waiter
	// was already waiting.
	for i := 1; i < len(granted); i++ {
		p, w := granted[i-1], granted[i]
		if p.End == math.MaxInt64 || p.Lost || w.Queued == 0 || w.Queued > p.End {
			continue
		}
		r.Handoffs = append(r.Handoffs, dur(w.Granted-p.End))
	}

	// FIFO: if a had entered the line before b called Acquire, a is granted
	// before b. Only waiters that stayed alive count: no process fault, no
	// Acquire error.
	if !o.NoFIFO {
		var live []*Waiter
		for _, w := range r.Waiters {
			if !w.ProcFault && w.AcqErr == "" && w.entered() != 0 {
				live = append(live, w)
			}
		}
		// Also waiters that never entered (still pending, never queued) are
		// ignored: nothing says where they stand.
		sort.Slice(live, func(i, j int) bool { return live[i].entered() < live[j].entered() })
		// prefix max of grant time (MaxInt64 if never granted) over entered order
		pm := make([]int64, len(live))
		pw := make([]*Waiter, len(live))
		for i, w := range live {
			g := w.Granted
			if g == 0 {
				g = math.MaxInt64
			}
			pm[i], pw[i] = g, w
			if i > 0 && pm[i-1] > g {
				pm[i], pw[i] = pm[i-1], pw[i-1]
			}
		}
		for _, b := range live {
			if b.Granted == 0 {
				continue
			}
			// a's with entered < b.Call
			k := sort.Search(len(live), func(i int) bool { return live[i].entered() >= b.Call })
			if k == 0 {
				continue
			}
			if pm[k-1] > b.Granted {
				a := pw[k-1]
				if a.Granted == 0 {
					r.violate("FIFO: %s (entered %s, pos %d) never granted, but %s (called %s) was granted at %s",
						a.W, rel(evs, a.entered()), a.Pos, b.W, rel(evs, b.Call), rel(evs, b.Granted))
				} else {
					r.violate("FIFO: %s entered at %s (pos %d) before %s called Acquire at %s, but was granted later (%s > %s)",
						a.W, rel(evs, a.entered()), a.Pos, b.W, rel(evs, b.Call), rel(evs, a.Granted), rel(evs, b.Granted))
				}
			}
		}
	}

	// No starvation: wait <= pos * (max hold + hand-off bound).
	if o.HandoffBound > 0 {
		per := r.MaxHold + o.HandoffBound
		for _, w := range granted {
			if w.Queued == 0 || w.Pos <= 0 || w.ProcFault {
				continue
			}
			wait := dur(w.Granted - w.Queued)
			bound := time.Duration(w.Pos) * per
			rat := float64(wait) / float64(bound)
			if rat > r.MaxStarveRat {
				r.MaxStarveRat = rat
			}
			if wait > bound {
				r.violate("starvation: %s at position %d waited %v > bound %v (= pos × (max hold %v + hand-off %v))",
					w.W, w.Pos, wait, bound, r.MaxHold, o.HandoffBound)
			}
		}
	}
	return r
}

// rel prints a time relative to the first event.
func rel(evs []Ev, t int64) string {
	if len(evs) == 0 {
		return fmt.Sprint(t)
	}
	return "+" + dur(t-evs[0].T).Round(time.Microsecond).String()
}

func relEnd(evs []Ev, t int64) string {
	if t == math.MaxInt64 {
		return "still held"
	}
	return rel(evs, t)
}

// Summary is a one-line report of a check.
func (r *CheckResult) Summary() string {
	p50, p99, mx := r.HandoffStats()
	return fmt.Sprintf("grants=%d lost=%d violations=%d maxHold=%v handoff p50=%v p99=%v max=%v starvation-ratio=%.3f",
		r.Grants, r.Lost, len(r.Violations), r.MaxHold.Round(time.Microsecond),
		p50.Round(time.Microsecond), p99.Round(time.Microsecond), mx.Round(time.Microsecond), r.MaxStarveRat)
}

// Err returns the violations as one error, or nil.
func (r *CheckResult) Err() error {
	if len(r.Violations) == 0 {
		return nil
	}
	return fmt.Errorf("%d violation(s):\n  %s", len(r.Violations), strings.Join(r.Violations, "\n  "))
}

// TestChecker makes sure the checker catches what it claims to catch.
func TestChecker(t *testing.T) {
	ev := func(tm int64, w, kind string, f int64, pos int, err string) Ev {
		return Ev{T: tm * 1000, Proc: strings.Split(w, ".")[0], W: w, Kind: kind, Fence: f, Pos: pos, Err: err}
	}
	call := func(tm int64, w string) Ev { return ev(tm, w, "call", 0, 0, "") }
	queued := func(tm int64, w string, pos int) Ev { return ev(tm, w, "queued", 0, pos, "") }
	granted := func(tm int64, w string, f int64) Ev { return ev(tm, w, "granted", f, 0, "") }
	released := func(tm int64, w string, f int64, err string) Ev { return ev(tm, w, "rel", f, 0, err) }
	// a holds; b, then c, queue behind it; the lock passes to first, then
	// to second.
	handoff := func(first, second string) []Ev {
		return []Ev{
			call(1, "a.1"), granted(2, "a.1", 10),
			call(3, "b.1"), queued(4, "b.1", 1),
			call(5, "c.1"), queued(6, "c.1", 2),
			released(10, "a.1", 10, "ok"), granted(11, first, 11),
			released(20, first, 11, "ok"), granted(21, second, 12),
			released(30, second, 12, "ok"),
		}
	}
	// a and b hold at once; a's Release then ends with aErr.
	overlap := func(aErr string) []Ev {
		return []Ev{
			call(1, "a.1"), granted(2, "a.1", 10), call(3, "b.1"), granted(4, "b.1", 11),
			released(5, "a.1", 10, aErr), released(6, "b.1", 11, "ok"),
		}
	}
	oneMS := CheckOpts{HandoffBound: time.Millisecond}
	for _, c := range []struct {
		name string
		o    CheckOpts
		evs  []Ev
		want string // the violation to catch; "" for none
	}{
		{"good", oneMS, handoff("b.1", "c.1"), ""},
		{"overlap", oneMS, overlap("ok"), "mutual exclusion"},
		{"fence", oneMS, []Ev{
			call(1, "a.1"), granted(2, "a.1", 10), released(3, "a.1", 10, "ok"),
			call(4, "b.1"), granted(5, "b.1", 9), released(6, "b.1", 9, "ok"),
		}, "fence order"},
		{"fifo", oneMS, handoff("c.1", "b.1"), "FIFO"},
		{"starved", oneMS, []Ev{
			call(1, "a.1"), granted(2, "a.1", 10), call(3, "b.1"), queued(4, "b.1", 1),
			released(10, "a.1", 10, "ok"), granted(5000, "b.1", 11), released(5001, "b.1", 11, "ok"),
		}, "starvation"},
		// A lost lease is exempt from mutual exclusion.
		{"lost lease", CheckOpts{}, overlap("notheld"), ""},
	} {
		err := Check(c.evs, c.o).Err()
		if c.want == "" && err != nil {
			t.Errorf("%s: history rejected: %v", c.name, err)
		}
		if c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: want a %q violation, got %v", c.name, c.want, err)
		}
	}
}
