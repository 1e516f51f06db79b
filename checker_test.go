package fairlock_test

// A plain interval checker of lock histories: the mutex, semaphores and
// read-write locks.
//
// Every waiter (one Acquire call) contributes, from the events of its process:
//   call     before Acquire was called (what it asked for: kind, capacity, permits)
//   queued   OnQueued fired: its enqueue had reached Redis (position given)
//   granted  Acquire returned a lease (fence)
//   rel      Release was called (stamped before the call; result in Err)
//   lost     the lease's Done closed with ErrLost
//   acqerr   Acquire returned an error
// plus the parent's kill/stop events for whole processes.
//
// Observed intervals are inside the real ones: a grant is seen after Redis
// made it, a release is stamped before Redis sees it. So if the real holds
// never exceed the capacity, the observed ones cannot either: the check has
// no false alarms from observation delay. The same reasoning covers all
// three kinds, as the library's engine does: the mutex is a semaphore of
// capacity 1, and a read-write lock one of MaxCapacity whose readers take
// one permit and whose writers take all.
//
// Grants made together (a release that frees permits for several waiters)
// may be seen in any order by their processes. So order is judged only
// where it is certain: a grant seen before another's call came first; of
// two grants that cannot be held together, the one seen first came first
// (the other could not start before it ended); and otherwise by fence,
// which Redis hands out in grant order.

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Waiter is one Acquire call, assembled from the history.
type Waiter struct {
	W, Proc   string
	Name      string // lock name
	Lk        string // "mutex", "sem", "read", "write" (see Req)
	Cap, Per  int64  // capacity and permits, as the checker counts them
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
	MaxHolders   int             // most leases seen held at once on one lock
	MaxInUse     int64           // most semaphore permits seen held at once
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
			w = &Waiter{W: e.W, Proc: e.Proc, End: math.MaxInt64, Lk: "mutex", Cap: 1, Per: 1}
			byW[e.W] = w
			order = append(order, w)
		}
		switch e.Kind {
		case "call":
			w.Call, w.Name = e.T, e.L
			if e.Lk != "" {
				w.Lk, w.Cap, w.Per = e.Lk, e.Cap, e.Per
			}
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

// Check verifies, lock by lock, that the capacity held (mutual exclusion
// for the mutex, writer exclusion for a read-write lock), fence order, FIFO
// with the head-of-line rule, and no starvation. A mutex, a semaphore and a
// read-write lock of one name are different locks.
func Check(evs []Ev, o CheckOpts) *CheckResult {
	all := BuildWaiters(evs)
	byLock := map[string][]*Waiter{}
	var locks []string
	for _, w := range all {
		k := family(w.Lk) + " " + strconv.Quote(w.Name)
		if _, ok := byLock[k]; !ok {
			locks = append(locks, k)
		}
		byLock[k] = append(byLock[k], w)
	}
	r := &CheckResult{Waiters: all}
	for _, k := range locks {
		one := checkLock(evs, byLock[k], o)
		r.Grants += one.Grants
		r.Lost += one.Lost
		r.MaxHold = max(r.MaxHold, one.MaxHold)
		r.MaxHolders = max(r.MaxHolders, one.MaxHolders)
		r.MaxInUse = max(r.MaxInUse, one.MaxInUse)
		r.Handoffs = append(r.Handoffs, one.Handoffs...)
		r.MaxStarveRat = max(r.MaxStarveRat, one.MaxStarveRat)
		for _, v := range one.Violations {
			r.violate("%s: %s", strings.Replace(k, "mutex", "lock", 1), v)
		}
	}
	return r
}

// what names a waiter's request in a violation.
func (w *Waiter) what() string {
	switch w.Lk {
	case "sem":
		return fmt.Sprintf("%s (%d of %d permits)", w.W, w.Per, w.Cap)
	case "read", "write":
		return w.W + " (" + w.Lk + ")"
	}
	return w.W
}

// rank places w's grant in grant order: when (the mutex) or at which
// fence it was granted; MaxInt64 if never.
func (w *Waiter) rank() int64 {
	switch {
	case w.Granted == 0:
		return math.MaxInt64
	case w.Lk == "mutex":
		return w.Granted
	}
	return w.Fence
}

// conflict tells whether a and b cannot hold at once.
func conflict(a, b *Waiter) bool { return a.Per+b.Per > min(a.Cap, b.Cap) }

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
	sort.SliceStable(granted, func(i, j int) bool { return granted[i].Granted < granted[j].Granted })

	r.checkCapacity(evs, granted)
	r.checkFences(evs, granted)

	// Hand-offs: from a release call to the next grant, when the next waiter
	// was already waiting and nobody else held on.
	for i := 1; i < len(granted); i++ {
		p, w := granted[i-1], granted[i]
		if p.End == math.MaxInt64 || p.Lost || w.Queued == 0 || w.Queued > p.End || w.Granted < p.End {
			continue
		}
		r.Handoffs = append(r.Handoffs, dur(w.Granted-p.End))
	}

	if !o.NoFIFO {
		r.checkFIFO(evs, waiters)
	}

	// No starvation: wait <= pos * (max hold + hand-off bound). Each waiter
	// ahead is granted within a hold and a hand-off of the one before it
	// (the holders it waits for were granted before, so they end within
	// the longest hold).
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

// checkCapacity checks that at each grant the permits of the intervals
// still open (grant to end, of leases not lost) and its own fit the
// capacity: mutual exclusion for the mutex, capacity for a semaphore, and
// for a read-write lock no writer beside any other holder. granted is in
// grant order.
func (r *CheckResult) checkCapacity(evs []Ev, granted []*Waiter) {
	var open []*Waiter
	for _, w := range granted {
		keep := open[:0]
		for _, h := range open {
			if h.End > w.Granted {
				keep = append(keep, h)
			}
		}
		open = keep
		inUse, capacity := w.Per, w.Cap
		var last *Waiter // the open interval that ends last
		for _, h := range open {
			inUse += h.Per
			capacity = min(capacity, h.Cap)
			if last == nil || h.End > last.End {
				last = h
			}
		}
		if len(open)+1 > r.MaxHolders {
			r.MaxHolders = len(open) + 1
		}
		if w.Lk == "sem" {
			r.MaxInUse = max(r.MaxInUse, inUse)
		}
		if inUse > capacity {
			switch w.Lk {
			case "mutex":
				r.violate("mutual exclusion: %s granted at %s while %s (fence %d) held [%s, %s]",
					w.W, rel(evs, w.Granted), last.W, last.Fence, rel(evs, last.Granted), relEnd(evs, last.End))
			case "sem":
				r.violate("capacity: %s granted at %s while %d of %d permits were held: %s",
					w.what(), rel(evs, w.Granted), inUse-w.Per, capacity, holding(evs, open))
			default:
				r.violate("writer exclusion: %s granted at %s while %s", w.what(), rel(evs, w.Granted), holding(evs, open))
			}
		}
		if !w.Lost {
			open = append(open, w)
		}
	}
}

// holding lists the open intervals of hs for a violation.
func holding(evs []Ev, hs []*Waiter) string {
	var parts []string
	for _, h := range hs {
		parts = append(parts, fmt.Sprintf("%s fence %d held [%s, %s]", h.what(), h.Fence, rel(evs, h.Granted), relEnd(evs, h.End)))
	}
	return strings.Join(parts, "; ")
}

// checkFences checks that fences are unique and strictly increase in grant
// order, wherever that order is certain: a grant seen before another
// waiter called came first; and of two grants that cannot hold at once,
// neither lost, the one seen first came first (the later could not start
// before the earlier ended, and that end is after its grant was seen). A
// lost lease may have seen its grant late, so only the first rule applies
// to it. granted is in grant order.
func (r *CheckResult) checkFences(evs []Ev, granted []*Waiter) {
	seen := map[int64]string{}
	for _, w := range granted {
		if other, dup := seen[w.Fence]; dup {
			r.violate("fence %d granted twice: %s and %s", w.Fence, other, w.W)
		}
		seen[w.Fence] = w.W
	}
	// Rule 1: the highest fence seen granted before each call.
	top := make([]*Waiter, len(granted)) // top[i]: highest fence of granted[:i+1]
	for i, w := range granted {
		top[i] = w
		if i > 0 && top[i-1].Fence > w.Fence {
			top[i] = top[i-1]
		}
	}
	for _, w := range granted {
		k := sort.Search(len(granted), func(i int) bool { return granted[i].Granted >= w.Call })
		if k > 0 && top[k-1].Fence >= w.Fence && top[k-1] != w {
			a := top[k-1]
			r.violate("fence order: %s called at %s, after %s was granted fence %d at %s, but got fence %d",
				w.what(), rel(evs, w.Call), a.what(), a.Fence, rel(evs, a.Granted), w.Fence)
		}
	}
	// Rule 2: per permit count, the highest fence granted so far to a lease
	// not lost.
	type best struct {
		per int64
		w   *Waiter
	}
	var bests []best
	for _, w := range granted {
		if w.Lost {
			continue
		}
		for _, b := range bests {
			if conflict(b.w, w) && b.w.Fence >= w.Fence {
				r.violate("fence order: %s got fence %d after %s got %d", w.what(), w.Fence, b.w.what(), b.w.Fence)
			}
		}
		i := slices.IndexFunc(bests, func(b best) bool { return b.per == w.Per })
		switch {
		case i < 0:
			bests = append(bests, best{w.Per, w})
		case w.Fence > bests[i].w.Fence:
			bests[i].w = w
		}
	}
}

// checkFIFO checks that if a had entered the line before b called Acquire,
// a was granted before b: a later request is never granted before an
// earlier live one, even one that would fit. Only waiters that stayed
// alive count: no process fault, no Acquire error; waiters that never
// entered (still pending, never queued) are ignored, as nothing says where
// they stand.
//
// For the mutex, "before" is the order of grants as seen (one grant cannot
// start before the previous holder released). For the other kinds, grants
// made together are seen in any order, so it is the order of fences, which
// Redis hands out in grant order, and within one script in queue order.
func (r *CheckResult) checkFIFO(evs []Ev, waiters []*Waiter) {
	var live []*Waiter
	for _, w := range waiters {
		if !w.ProcFault && w.AcqErr == "" && w.entered() != 0 {
			live = append(live, w)
		}
	}
	sort.Slice(live, func(i, j int) bool { return live[i].entered() < live[j].entered() })
	// prefix max of order over entered order
	pm := make([]int64, len(live))
	pw := make([]*Waiter, len(live))
	for i, w := range live {
		pm[i], pw[i] = w.rank(), w
		if i > 0 && pm[i-1] > pm[i] {
			pm[i], pw[i] = pm[i-1], pw[i-1]
		}
	}
	for _, b := range live {
		if b.Granted == 0 {
			continue
		}
		// a's with entered < b.Call
		k := sort.Search(len(live), func(i int) bool { return live[i].entered() >= b.Call })
		if k == 0 || pm[k-1] <= b.rank() {
			continue
		}
		a := pw[k-1]
		switch {
		case a.Granted == 0:
			r.violate("FIFO: %s (entered %s, pos %d) never granted, but %s (called %s) was granted at %s",
				a.what(), rel(evs, a.entered()), a.Pos, b.what(), rel(evs, b.Call), rel(evs, b.Granted))
		case a.Lk == "mutex":
			r.violate("FIFO: %s entered at %s (pos %d) before %s called Acquire at %s, but was granted later (%s > %s)",
				a.W, rel(evs, a.entered()), a.Pos, b.W, rel(evs, b.Call), rel(evs, a.Granted), rel(evs, b.Granted))
		default:
			r.violate("FIFO: %s entered at %s (pos %d) before %s called Acquire at %s, but was granted after it (fence %d > %d)",
				a.what(), rel(evs, a.entered()), a.Pos, b.what(), rel(evs, b.Call), a.Fence, b.Fence)
		}
	}
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
	return fmt.Sprintf("grants=%d lost=%d violations=%d maxHold=%v maxHolders=%d maxPermits=%d handoff p50=%v p99=%v max=%v starvation-ratio=%.3f",
		r.Grants, r.Lost, len(r.Violations), r.MaxHold.Round(time.Microsecond), r.MaxHolders, r.MaxInUse,
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

// Synthetic histories for the checker's tests: times in µs; waiter "a.1"
// runs in process "a" and locks "x".
func sev(tm int64, w, kind string, f int64, pos int, err string) Ev {
	return Ev{T: tm * 1000, Proc: strings.Split(w, ".")[0], W: w, Kind: kind, Fence: f, Pos: pos, Err: err}
}

func scall(tm int64, w string, r Req) Ev {
	e := callEv(w, "x", r)
	e.T, e.Proc = tm*1000, strings.Split(w, ".")[0]
	return e
}

func squeued(tm int64, w string, pos int) Ev               { return sev(tm, w, "queued", 0, pos, "") }
func sgranted(tm int64, w string, f int64) Ev              { return sev(tm, w, "granted", f, 0, "") }
func sreleased(tm int64, w string, f int64, err string) Ev { return sev(tm, w, "rel", f, 0, err) }

// TestCheckerKinds makes sure the checker catches, for semaphores and
// read-write locks, what it claims to catch, and accepts what they may do:
// share, and grant several waiters at once in any order seen.
func TestCheckerKinds(t *testing.T) {
	sem := func(n int) Req { return semReq(3, n) }
	kill := func(tm int64, proc string) Ev { return Ev{T: tm * 1000, Proc: proc, Kind: "kill"} }
	for _, c := range []struct {
		name string
		evs  []Ev
		want string // the violation to catch; "" for none
	}{
		{"sem shares within capacity", []Ev{
			scall(1, "a.1", sem(2)), sgranted(2, "a.1", 10),
			scall(3, "b.1", sem(1)), sgranted(4, "b.1", 11),
			scall(5, "c.1", sem(2)), squeued(6, "c.1", 1),
			sreleased(10, "a.1", 10, "ok"), sgranted(11, "c.1", 12),
			sreleased(12, "b.1", 11, "ok"), sreleased(20, "c.1", 12, "ok"),
		}, ""},
		{"sem over capacity", []Ev{
			scall(1, "a.1", sem(2)), sgranted(2, "a.1", 10),
			scall(3, "b.1", sem(2)), sgranted(4, "b.1", 11),
			sreleased(5, "a.1", 10, "ok"), sreleased(6, "b.1", 11, "ok"),
		}, `sem "x": capacity`},
		// A lost lease is exempt, as for the mutex.
		{"sem lost lease", []Ev{
			scall(1, "a.1", sem(2)), sgranted(2, "a.1", 10),
			scall(3, "b.1", sem(2)), sgranted(4, "b.1", 11),
			sreleased(5, "a.1", 10, "notheld"), sreleased(6, "b.1", 11, "ok"),
		}, ""},
		// A killed holder does nothing after its death.
		{"sem killed holder", []Ev{
			scall(1, "a.1", sem(2)), sgranted(2, "a.1", 10),
			scall(3, "b.1", sem(2)), squeued(4, "b.1", 1), kill(5, "a"),
			sgranted(8, "b.1", 11), sreleased(9, "b.1", 11, "ok"),
		}, ""},
		// c (1 permit) fits beside a, but b (3) waits ahead of it.
		{"sem head-of-line", []Ev{
			scall(1, "a.1", sem(2)), sgranted(2, "a.1", 10),
			scall(3, "b.1", sem(3)), squeued(4, "b.1", 1),
			scall(5, "c.1", sem(1)), sgranted(7, "c.1", 11),
			sreleased(10, "a.1", 10, "ok"), sreleased(10, "c.1", 11, "ok"),
			sgranted(11, "b.1", 12), sreleased(12, "b.1", 12, "ok"),
		}, "FIFO"},
		{"sem head-of-line, head never granted", []Ev{
			scall(1, "a.1", sem(3)), sgranted(2, "a.1", 10),
			scall(3, "b.1", sem(3)), squeued(4, "b.1", 1),
			scall(5, "c.1", sem(1)), squeued(6, "c.1", 2),
			sreleased(10, "a.1", 10, "ok"), sgranted(11, "c.1", 11), sreleased(12, "c.1", 11, "ok"),
		}, "never granted"},
		// One release grants b and c together; c's process reports first.
		{"sem grants together, seen out of order", []Ev{
			scall(1, "a.1", sem(3)), sgranted(2, "a.1", 10),
			scall(3, "b.1", sem(1)), squeued(4, "b.1", 1),
			scall(5, "c.1", sem(2)), squeued(6, "c.1", 2),
			sreleased(10, "a.1", 10, "ok"), sgranted(11, "c.1", 12), sgranted(12, "b.1", 11),
			sreleased(13, "b.1", 11, "ok"), sreleased(14, "c.1", 12, "ok"),
		}, ""},
		// Grants that share can only be ordered when one was seen before
		// the other's call.
		{"sem fence after a call", []Ev{
			scall(1, "a.1", sem(1)), sgranted(2, "a.1", 12),
			scall(3, "b.1", sem(1)), sgranted(4, "b.1", 11),
			sreleased(5, "a.1", 12, "ok"), sreleased(6, "b.1", 11, "ok"),
		}, "fence order"},
		// b asked first but waited for a's permits: a's grant came first.
		{"sem fence of exclusive grants", []Ev{
			scall(0, "b.1", sem(2)), squeued(1, "b.1", 1),
			scall(1, "a.1", sem(2)), sgranted(2, "a.1", 12), sreleased(3, "a.1", 12, "ok"),
			sgranted(4, "b.1", 11), sreleased(5, "b.1", 11, "ok"),
		}, "fence order"},
		{"rw readers share, writer waits its turn", []Ev{
			scall(1, "a.1", readReq), sgranted(2, "a.1", 10),
			scall(3, "b.1", readReq), sgranted(4, "b.1", 11),
			scall(5, "c.1", writeReq), squeued(6, "c.1", 1),
			scall(7, "d.1", readReq), squeued(8, "d.1", 2),
			scall(9, "e.1", readReq), squeued(10, "e.1", 3),
			sreleased(11, "a.1", 10, "ok"), sreleased(12, "b.1", 11, "ok"),
			sgranted(13, "c.1", 12), sreleased(14, "c.1", 12, "ok"),
			sgranted(15, "e.1", 14), sgranted(16, "d.1", 13),
			sreleased(17, "d.1", 13, "ok"), sreleased(18, "e.1", 14, "ok"),
		}, ""},
		{"rw writer beside a reader", []Ev{
			scall(1, "a.1", readReq), sgranted(2, "a.1", 10),
			scall(3, "b.1", writeReq), sgranted(4, "b.1", 11),
			sreleased(5, "a.1", 10, "ok"), sreleased(6, "b.1", 11, "ok"),
		}, `rw "x": writer exclusion`},
		{"rw reader beside a writer", []Ev{
			scall(1, "a.1", writeReq), sgranted(2, "a.1", 10),
			scall(3, "b.1", readReq), sgranted(4, "b.1", 11),
			sreleased(5, "a.1", 10, "ok"), sreleased(6, "b.1", 11, "ok"),
		}, "writer exclusion"},
		{"rw lost writer", []Ev{
			scall(1, "a.1", writeReq), sgranted(2, "a.1", 10), sev(3, "a.1", "lost", 10, 0, "lost"),
			scall(3, "b.1", readReq), sgranted(4, "b.1", 11), sreleased(6, "b.1", 11, "ok"),
		}, ""},
		// b joins the readers although the writer c waits ahead of it.
		{"rw reader passes a waiting writer", []Ev{
			scall(1, "a.1", readReq), sgranted(2, "a.1", 10),
			scall(3, "c.1", writeReq), squeued(4, "c.1", 1),
			scall(5, "b.1", readReq), sgranted(6, "b.1", 11),
			sreleased(10, "a.1", 10, "ok"), sreleased(12, "b.1", 11, "ok"),
			sgranted(13, "c.1", 12), sreleased(14, "c.1", 12, "ok"),
		}, "FIFO"},
		// The writer's fence must be above every reader's granted before it.
		{"rw writer fence below a reader's", []Ev{
			scall(1, "a.1", readReq), scall(1, "c.1", writeReq), squeued(1, "c.1", 1),
			sgranted(2, "a.1", 12), sreleased(5, "a.1", 12, "ok"),
			sgranted(6, "c.1", 11), sreleased(7, "c.1", 11, "ok"),
		}, "fence order"},
		// A mutex, a semaphore and a read-write lock of one name are
		// independent.
		{"kinds of one name", []Ev{
			scall(1, "a.1", mutexReq), sgranted(2, "a.1", 10),
			scall(1, "b.1", sem(3)), sgranted(3, "b.1", 10),
			scall(1, "c.1", writeReq), sgranted(4, "c.1", 10),
			sreleased(5, "a.1", 10, "ok"), sreleased(5, "b.1", 10, "ok"), sreleased(5, "c.1", 10, "ok"),
		}, ""},
	} {
		err := Check(c.evs, CheckOpts{HandoffBound: time.Millisecond}).Err()
		if c.want == "" && err != nil {
			t.Errorf("%s: history rejected: %v", c.name, err)
		}
		if c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: want a %q violation, got %v", c.name, c.want, err)
		}
	}
	// Round trip of what the harness writes.
	for _, r := range []Req{mutexReq, semReq(3, 2), readReq, writeReq} {
		if got := parseReq(r.String()); got != r {
			t.Errorf("parseReq(%q) = %+v, want %+v", r.String(), got, r)
		}
		e := scall(1, "a.1", r)
		if got, ok := parseEv(e.String()); !ok || got != e {
			t.Errorf("parseEv(%q) = %+v, want %+v", e.String(), got, e)
		}
	}
}
