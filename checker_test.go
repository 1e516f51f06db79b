package fairlock_test

// The fault suite's checker of lock histories. It assembles each waiter
// (one Acquire call) from the events of its process, stamped on one clock:
//   call     before Acquire was called (what it asked for: kind, capacity, permits)
//   queued   OnQueued fired: its enqueue had reached Redis (position given)
//   granted  Acquire returned a lease (fence)
//   rel      Release was called (stamped before the call; result in Err)
//   lost     the lease's Done closed with ErrLost
//   acqerr   Acquire returned an error
// plus the parent's kill/stop events for whole processes. It hands what was
// seen to the shared checks of internal/history (capacity, fences, FIFO),
// which want such stamps, and adds what only this suite measures:
// starvation bounds and hand-off latencies.

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fairlock/fairlock/internal/history"
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
	h := slices.Sorted(slices.Values(r.Handoffs))
	return h[len(h)/2], h[len(h)*99/100], h[len(h)-1]
}

// BuildWaiters assembles waiters from a history.
func BuildWaiters(evs []Ev) []*Waiter {
	byW := map[string]*Waiter{}
	var order []*Waiter
	closing := map[string][]int64{} // proc -> times it began closing its Locker
	faulted := map[string]bool{}    // proc -> killed or stopped
	killed := map[string]int64{}    // proc -> kill time
	for _, e := range evs {
		switch e.Kind {
		case "closing":
			closing[e.Proc] = append(closing[e.Proc], e.T)
		case "kill", "stop":
			faulted[e.Proc] = true
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
			w.End = min(w.End, e.T)
			if e.Err != "ok" && e.Err != "nolease" {
				w.Lost = true
			}
		case "lost":
			w.Lost = true
		}
	}
	for _, w := range order {
		w.ProcFault = faulted[w.Proc]
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
		k := strings.Replace(family(w.Lk), "mutex", "lock", 1) + " " + strconv.Quote(w.Name)
		if _, ok := byLock[k]; !ok {
			locks = append(locks, k)
		}
		byLock[k] = append(byLock[k], w)
	}
	r := &CheckResult{Waiters: all}
	for _, k := range locks {
		r.checkLock(evs, k, byLock[k], o)
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
// fence it was granted; MaxInt64 if never. faultFIFO sorts by it.
func (w *Waiter) rank() int64 {
	switch {
	case w.Granted == 0:
		return math.MaxInt64
	case w.Lk == "mutex":
		return w.Granted
	}
	return w.Fence
}

// request is w as the shared checks see it. A lost lease may have run out
// right after its grant, so it counts as held no longer than that: the
// holds checked stay inside the real ones. Only waiters that stayed alive
// and entered the line have a place in it that FIFO can judge.
func (w *Waiter) request() history.Request {
	q := history.Request{Permits: w.Per, Called: w.Call, Entered: w.entered(), Granted: cmp.Or(w.Granted, history.Never), Fence: w.Fence,
		End: w.End, Lost: w.Lost, Exempt: w.ProcFault || w.AcqErr != "" || w.entered() == 0}
	if w.Lost {
		q.End = w.Granted
	}
	return q
}

// checkLock adds to r what it finds of the waiters of one lock, named k in
// violations.
func (r *CheckResult) checkLock(evs []Ev, k string, waiters []*Waiter, o CheckOpts) {
	l := history.Lock{Cap: history.Never}
	var granted []*Waiter
	var maxHold time.Duration
	for _, w := range waiters {
		l.Reqs = append(l.Reqs, w.request())
		if w.Granted == 0 {
			continue
		}
		l.Cap = min(l.Cap, w.Cap) // a call for another capacity is refused, never granted
		granted = append(granted, w)
		if w.Lost {
			r.Lost++
		}
		if w.End != math.MaxInt64 {
			maxHold = max(maxHold, dur(w.End-w.Granted))
		}
	}
	r.Grants += len(granted)
	r.MaxHold = max(r.MaxHold, maxHold)
	sort.SliceStable(granted, func(i, j int) bool { return granted[i].Granted < granted[j].Granted })

	l.Holds(func(i int, held []int) {
		r.MaxHolders = max(r.MaxHolders, len(held)+1)
		if w := waiters[i]; w.Lk == "sem" {
			inUse := w.Per
			for _, h := range held {
				inUse += waiters[h].Per
			}
			r.MaxInUse = max(r.MaxInUse, inUse)
		}
	})
	vs := append(l.CheckCapacity(), l.CheckFences()...)
	if !o.NoFIFO {
		vs = append(vs, l.CheckFIFO()...)
	}
	for _, v := range vs {
		r.violate("%s: %s", k, describe(evs, waiters, l.Cap, v))
	}

	// Hand-offs: from a release call to the next grant, when the next waiter
	// was already waiting and nobody else held on.
	for i := 1; i < len(granted); i++ {
		p, w := granted[i-1], granted[i]
		if p.End == math.MaxInt64 || p.Lost || w.Queued == 0 || w.Queued > p.End || w.Granted < p.End {
			continue
		}
		r.Handoffs = append(r.Handoffs, dur(w.Granted-p.End))
	}

	// No starvation: wait <= pos * (max hold + hand-off bound). Each waiter
	// ahead is granted within a hold and a hand-off of the one before it
	// (the holders it waits for were granted before, so they end within
	// the longest hold).
	if o.HandoffBound > 0 {
		per := maxHold + o.HandoffBound
		for _, w := range granted {
			if w.Queued == 0 || w.Pos <= 0 || w.ProcFault {
				continue
			}
			wait := dur(w.Granted - w.Queued)
			bound := time.Duration(w.Pos) * per
			r.MaxStarveRat = max(r.MaxStarveRat, float64(wait)/float64(bound))
			if wait > bound {
				r.violate("%s: starvation: %s at position %d waited %v > bound %v (= pos × (max hold %v + hand-off %v))",
					k, w.W, w.Pos, wait, bound, maxHold, o.HandoffBound)
			}
		}
	}
}

// describe words v, a violation among ws, a lock's waiters of capacity
// capacity.
func describe(evs []Ev, ws []*Waiter, capacity int64, v history.Violation) string {
	w := ws[v.Req]
	if v.Rule == history.OverCapacity {
		var held []string
		inUse := int64(0)
		for _, i := range v.Others {
			h := ws[i]
			inUse += h.Per
			held = append(held, fmt.Sprintf("%s fence %d held [%s, %s]", h.what(), h.Fence, rel(evs, h.Granted), relEnd(evs, h.End)))
		}
		broke := map[string]string{"mutex": "mutual exclusion", "rw": "writer exclusion"}[family(w.Lk)]
		if broke == "" {
			broke = fmt.Sprintf("capacity (%d of %d permits held)", inUse, capacity)
		}
		return fmt.Sprintf("%s: %s granted at %s while %s", broke, w.what(), rel(evs, w.Granted), strings.Join(held, "; "))
	}
	a := ws[v.Others[0]]
	switch {
	case v.Rule == history.FenceTwice:
		return fmt.Sprintf("fence %d granted twice: %s and %s", w.Fence, a.W, w.W)
	case v.Rule == history.FenceAfterCall:
		return fmt.Sprintf("fence order: %s called at %s, after %s was granted fence %d at %s, but got fence %d",
			w.what(), rel(evs, w.Call), a.what(), a.Fence, rel(evs, a.Granted), w.Fence)
	case v.Rule == history.FenceOrder:
		return fmt.Sprintf("fence order: %s got fence %d after %s got %d", w.what(), w.Fence, a.what(), a.Fence)
	case a.Granted == 0:
		return fmt.Sprintf("FIFO: %s (entered %s, pos %d) never granted, but %s (called %s) was granted at %s",
			a.what(), rel(evs, a.entered()), a.Pos, w.what(), rel(evs, w.Call), rel(evs, w.Granted))
	}
	return fmt.Sprintf("FIFO: %s entered at %s (pos %d) before %s called Acquire at %s, but was granted after it (fence %d > %d)",
		a.what(), rel(evs, a.entered()), a.Pos, w.what(), rel(evs, w.Call), a.Fence, w.Fence)
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

// checkerCase is a history and the violation the checker must find in it
// ("" for none).
type checkerCase struct {
	name string
	evs  []Ev
	want string
}

func runCheckerCases(t *testing.T, cases []checkerCase) {
	t.Helper()
	for _, c := range cases {
		err := Check(c.evs, CheckOpts{HandoffBound: time.Millisecond}).Err()
		t.Logf("%s: %v", c.name, err)
		if c.want == "" && err != nil {
			t.Errorf("%s: history rejected: %v", c.name, err)
		}
		if c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: want a %q violation, got %v", c.name, c.want, err)
		}
	}
}

// TestChecker makes sure the checker reads histories as it claims, and
// words what the shared checks find (internal/history tests them).
func TestChecker(t *testing.T) {
	t.Parallel()
	m := mutexReq
	// a holds; b, then c, queue behind it; the lock passes to first, then
	// to second.
	handoff := func(first, second string) []Ev {
		return []Ev{
			scall(1, "a.1", m), sgranted(2, "a.1", 10),
			scall(3, "b.1", m), squeued(4, "b.1", 1),
			scall(5, "c.1", m), squeued(6, "c.1", 2),
			sreleased(10, "a.1", 10, "ok"), sgranted(11, first, 11),
			sreleased(20, first, 11, "ok"), sgranted(21, second, 12),
			sreleased(30, second, 12, "ok"),
		}
	}
	// a and b hold at once; a's Release then ends with aErr.
	overlap := func(aErr string) []Ev {
		return []Ev{
			scall(1, "a.1", m), sgranted(2, "a.1", 10), scall(3, "b.1", m), sgranted(4, "b.1", 11),
			sreleased(5, "a.1", 10, aErr), sreleased(6, "b.1", 11, "ok"),
		}
	}
	runCheckerCases(t, []checkerCase{
		{"good", handoff("b.1", "c.1"), ""},
		{"overlap", overlap("ok"), `lock "x": mutual exclusion`},
		{"fence", []Ev{
			scall(1, "a.1", m), sgranted(2, "a.1", 10), sreleased(3, "a.1", 10, "ok"),
			scall(4, "b.1", m), sgranted(5, "b.1", 9), sreleased(6, "b.1", 9, "ok"),
		}, "fence order"},
		{"fifo", handoff("c.1", "b.1"), "FIFO"},
		{"starved", []Ev{
			scall(1, "a.1", m), sgranted(2, "a.1", 10), scall(3, "b.1", m), squeued(4, "b.1", 1),
			sreleased(10, "a.1", 10, "ok"), sgranted(5000, "b.1", 11), sreleased(5001, "b.1", 11, "ok"),
		}, "starvation"},
		// A Release that finds the lease gone makes it lost: it may have run
		// out at once.
		{"lost lease", overlap("notheld"), ""},
	})
}

// TestCheckerKinds makes sure the checker reads semaphore and read-write
// lock histories as it claims: permits, kills, losses, kinds of one name.
func TestCheckerKinds(t *testing.T) {
	t.Parallel()
	sem := func(n int) Req { return semReq(3, n) }
	kill := func(tm int64, proc string) Ev { return Ev{T: tm * 1000, Proc: proc, Kind: "kill"} }
	// a holds all 3 permits; b queues for 3, then c for 1, and c is granted
	// first.
	headOfLine := func(fault ...Ev) []Ev {
		return append(append([]Ev{
			scall(1, "a.1", sem(3)), sgranted(2, "a.1", 10),
			scall(3, "b.1", sem(3)), squeued(4, "b.1", 1),
			scall(5, "c.1", sem(1)), squeued(6, "c.1", 2),
		}, fault...), sreleased(10, "a.1", 10, "ok"), sgranted(11, "c.1", 11), sreleased(12, "c.1", 11, "ok"))
	}
	runCheckerCases(t, []checkerCase{
		{"sem over capacity", []Ev{
			scall(1, "a.1", sem(2)), sgranted(2, "a.1", 10),
			scall(3, "b.1", sem(2)), sgranted(4, "b.1", 11),
			sreleased(5, "a.1", 10, "ok"), sreleased(6, "b.1", 11, "ok"),
		}, `sem "x": capacity (2 of 3 permits held): b.1 (2 of 3 permits) granted at +3µs while a.1`},
		// A killed holder does nothing after its death.
		{"sem killed holder", []Ev{
			scall(1, "a.1", sem(2)), sgranted(2, "a.1", 10),
			scall(3, "b.1", sem(2)), squeued(4, "b.1", 1), kill(5, "a"),
			sgranted(8, "b.1", 11), sreleased(9, "b.1", 11, "ok"),
		}, ""},
		{"sem head-of-line, head never granted", headOfLine(), "never granted"},
		// ... unless its process was faulted: then nothing says where it stood.
		{"sem head-of-line, head killed", headOfLine(kill(7, "b")), ""},
		{"rw writer beside a reader", []Ev{
			scall(1, "a.1", readReq), sgranted(2, "a.1", 10),
			scall(3, "b.1", writeReq), sgranted(4, "b.1", 11),
			sreleased(5, "a.1", 10, "ok"), sreleased(6, "b.1", 11, "ok"),
		}, `rw "x": writer exclusion: b.1 (write)`},
		{"rw lost writer", []Ev{
			scall(1, "a.1", writeReq), sgranted(2, "a.1", 10), sev(3, "a.1", "lost", 10, 0, "lost"),
			scall(3, "b.1", readReq), sgranted(4, "b.1", 11), sreleased(6, "b.1", 11, "ok"),
		}, ""},
		// A mutex, a semaphore and a read-write lock of one name are
		// independent.
		{"kinds of one name", []Ev{
			scall(1, "a.1", mutexReq), sgranted(2, "a.1", 10),
			scall(1, "b.1", sem(3)), sgranted(3, "b.1", 10),
			scall(1, "c.1", writeReq), sgranted(4, "c.1", 10),
			sreleased(5, "a.1", 10, "ok"), sreleased(5, "b.1", 10, "ok"), sreleased(5, "c.1", 10, "ok"),
		}, ""},
	})
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
