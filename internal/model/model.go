// Package model is fairlock's rule of who is granted a semaphore next,
// written once in plain Go: capacity, head of line, priority lanes and
// aging, groups with weights, their clocks, limits, debt and forgetting,
// on a clock the caller sets. The Lua engine (scripts/lib/counted/queue.lua
// and lib/lanes.lua, lib/grant.lua, lib/maintain.lua) keeps the same rule
// in Redis's data structures; fairlock's differential test drives both
// with the same random calls and compares them after every step, and this
// package's tests check the rule's own bounds.
//
// The rule, for a semaphore of Capacity permits:
//
//   - Waiters line up by arrival. An arrival is the server's clock in µs,
//     at least one above the last waiter's, so that a clock set back
//     cannot let a later waiter pass.
//   - Priority p (0 to 9) puts a waiter in lane p. Its level is
//     min(9, p + ⌊waited ÷ aging⌋). A lane counts at its head's level and
//     arrival, or, with groups, at its oldest waiter's if that is higher.
//     The lane of the highest level goes first, the earliest arrival
//     breaking ties.
//   - Without groups a lane is one FIFO line. With groups (once any party
//     names one; the parties that name none are the group ""), each group
//     has a line in each lane, and each lane is a fair queue of its own:
//     the next grant goes to the group of the lowest clock among those
//     whose head its limit lets in (the set), ties going to the group
//     whose head waited first when it joined the set, then by name. Each
//     group's clock in a lane is the permit-time its grants there used
//     (permits × µs ÷ weight): a grant charges an estimate at once
//     (permits × the group's mean hold ÷ weight, at least 1), a scan what
//     a hold has lasted beyond what it was charged, the release the rest.
//     The lane's clock is the clock of the group granted there last,
//     before its charge, never moving back. A group that starts to
//     compete in a lane (joins its set, or is granted at once) starts at
//     its own clock or the lane's, whichever is later: it banks no credit
//     while away and keeps its debt. A group with nothing held and nobody
//     waiting is forgotten; its debts (clocks above their lanes') are
//     kept, at most IdleGroups of them, the least forgotten first.
//   - Head of line: when the head chosen does not fit (permits, limit),
//     nobody is granted.
//   - Fences are max(last + 1, the clock in µs).
//
// A party whose session died is dropped: a waiter when it comes to the
// head or at a scan, a holder at a scan or a heartbeat. A scan is due once
// per three quarters of the calling Locker's heartbeat.
package model

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// IdleGroups is how many debts of forgotten groups a lock keeps
// (scripts.IdleGroups).
const IdleGroups = 1000

// DefaultAgingMs is the aging of a request that names none.
const DefaultAgingMs = 30_000

// A Request is what one Acquire asks for.
type Request struct {
	Token   string // "<session>:<seq>", unique
	Session string
	Lane    int    // its priority, 0 to 9
	AgingMs int64  // its Locker's aging
	Group   string // "" for none
	Weight  int    // its group's weight, 1 to 1000; ignored without a group
	Permits int
}

// A Grant is a request granted, and its fence.
type Grant struct {
	Token string
	Fence int64
}

type waiter struct {
	Request
	arrival int64
}

type holder struct {
	Request
	fence    int64
	deadline int64 // its record's end, ms: the order of the holders
	record   bool  // granted in grouped mode: it is charged
	since    int64 // µs, when granted (record)
	charged  int64
}

type group struct {
	held   int
	mean   *int64
	weight int
	lanes  []int // lanes it has a clock in: 0, then the others in the order they came
	clock  map[int]*int64
	member map[int]string // its member in each lane's set, while placed
}

// A Lock is one semaphore.
type Lock struct {
	Capacity, Limit int
	// GrantTTLMs is how long a grant's record lives: long, in tests.
	GrantTTLMs int64
	// Check, if set, is called before each grant the grant loop makes,
	// with the waiter granted: tests check the rule's bounds in it.
	Check func(granted Request)

	now       int64 // µs
	used      int
	holders   []*holder
	waiters   []*waiter // in arrival order
	dead      map[string]bool
	grouped   int
	groups    map[string]*group
	partyOf   map[string]string // token -> group, for the parties that named one
	lanes     [10]int64         // each lane's clock
	mean      *int64            // the lock's mean hold
	idle      map[string]int64  // "<lane>:<group>" -> clock
	scanAt    *int64            // ms
	lastFence int64             // the last fence drawn
}

// New returns an idle lock of capacity permits and group limit (0: none).
func New(capacity, limit int) *Lock {
	return &Lock{Capacity: capacity, Limit: limit, GrantTTLMs: 1 << 40, dead: map[string]bool{}, idle: map[string]int64{}}
}

// SetClock sets the server's clock, in µs.
func (l *Lock) SetClock(us int64) { l.now = us }

// Kill ends session: its parties are dead from now on.
func (l *Lock) Kill(session string) { l.dead[session] = true }

func (l *Lock) nowMs() int64 { return l.now / 1000 }

func (l *Lock) alive(r Request) bool { return !l.dead[r.Session] }

// ---- the queue: arrivals, lines, lanes ----

// arrive numbers a waiter of lane, as lib/fifo.lua's arrive does.
func (l *Lock) arrive(lane int) int64 {
	var last0, lastUp *int64
	for _, w := range l.waiters {
		a := w.arrival
		if w.Lane == 0 && (last0 == nil || a > *last0) {
			last0 = &a
		} else if w.Lane > 0 && (lastUp == nil || a > *lastUp) {
			lastUp = &a
		}
	}
	at := l.now
	if last0 != nil {
		at = max(at, *last0+1)
	}
	if lastUp != nil && (lane > 0 || last0 == nil) {
		at = max(at, *lastUp+1)
	}
	return at
}

// line is the waiters of group in lane, in arrival order.
func (l *Lock) line(grp string, lane int) []*waiter {
	var out []*waiter
	for _, w := range l.waiters {
		if w.Lane == lane && l.groupOf(w.Token) == grp {
			out = append(out, w)
		}
	}
	return out
}

func (l *Lock) head(grp string, lane int) *waiter {
	if line := l.line(grp, lane); len(line) > 0 {
		return line[0]
	}
	return nil
}

func (l *Lock) groupOf(token string) string {
	if l.grouped == 0 {
		return ""
	}
	return l.partyOf[token]
}

func level(now int64, lane int, at, agingMs int64) int {
	return min(9, lane+int(math.Floor(float64(max(now-at, 0))/float64(1000*agingMs))))
}

// laneHead is the head of lane: its line's, or with groups, the line's of
// the first group of its set.
func (l *Lock) laneHead(lane int) *waiter {
	if l.grouped == 0 {
		return l.head("", lane)
	}
	if g := l.firstOfSet(lane); g != nil {
		return l.head(*g, lane)
	}
	return nil
}

// nextHead is the waiter to grant next, or nil.
func (l *Lock) nextHead() *waiter {
	if len(l.waiters) == 0 {
		return nil
	}
	upper := slices.ContainsFunc(l.waiters, func(w *waiter) bool { return w.Lane > 0 })
	if !upper {
		return l.laneHead(0)
	}
	type cand struct {
		head      *waiter
		lane, lvl int
		at        int64
	}
	var heads []*cand
	for lane := range 10 {
		if h := l.laneHead(lane); h != nil {
			heads = append(heads, &cand{head: h, lane: lane, lvl: level(l.now, lane, h.arrival, h.AgingMs), at: h.arrival})
		}
	}
	if len(heads) <= 1 {
		if len(heads) == 1 {
			return heads[0].head
		}
		return nil
	}
	var best *cand
	for _, h := range heads {
		if l.grouped > 0 {
			// With groups, the lane's oldest waiter counts for it too.
			o := l.oldest(h.lane)
			if lvl := level(l.now, h.lane, o.arrival, o.AgingMs); lvl > h.lvl || (lvl == h.lvl && o.arrival < h.at) {
				h.lvl, h.at = lvl, o.arrival
			}
		}
		if best == nil || h.lvl > best.lvl || (h.lvl == best.lvl && h.at < best.at) {
			best = h
		}
	}
	return best.head
}

// oldest is the oldest waiter of lane, which has one.
func (l *Lock) oldest(lane int) *waiter {
	for _, w := range l.waiters {
		if w.Lane == lane {
			return w
		}
	}
	return nil
}

func (l *Lock) removeWaiter(token string) bool {
	i := slices.IndexFunc(l.waiters, func(w *waiter) bool { return w.Token == token })
	if i < 0 {
		return false
	}
	l.waiters = slices.Delete(l.waiters, i, i+1)
	return true
}

// ---- groups: clocks, sets, debt ----

func (l *Lock) record(name string) *group {
	if g := l.groups[name]; g != nil {
		return g
	}
	g := &group{weight: 1, lanes: []int{0}, clock: map[int]*int64{}, member: map[int]string{}}
	l.groups[name] = g
	return g
}

func ptr(v int64) *int64 { return &v }

func (l *Lock) addLane(g *group, lane int) {
	if !slices.Contains(g.lanes, lane) {
		g.lanes = append(g.lanes, lane)
	}
}

// startClock is the clock a group starts at in lane: its own, or its
// debt if it was forgotten, or the lane's, whichever is latest.
func (l *Lock) startClock(name string, g *group, lane int) int64 {
	own := g.clock[lane]
	if own == nil {
		key := strconv.Itoa(lane) + ":" + name
		if debt, ok := l.idle[key]; ok {
			own = &debt
			delete(l.idle, key)
		}
		if lane > 0 {
			l.addLane(g, lane)
		}
	}
	if own == nil {
		return max(0, l.lanes[lane])
	}
	return max(*own, l.lanes[lane])
}

// placeIn puts the group in or out of lane's set; returns whether its
// line there has a head.
func (l *Lock) placeIn(name string, g *group, lane int) bool {
	h := l.head(name, lane)
	placed := h != nil && (l.Limit == 0 || g.held+h.Permits <= l.Limit)
	_, was := g.member[lane]
	switch {
	case placed && !was:
		g.clock[lane] = ptr(l.startClock(name, g, lane))
		g.member[lane] = fmt.Sprintf("%016d:%s", h.arrival, name)
	case was && !placed:
		delete(g.member, lane)
	}
	return h != nil
}

// place places the group in each lane it has a clock in, and forgets it
// when it has nobody waiting and nothing held.
func (l *Lock) place(name string) {
	g := l.record(name)
	waits := false
	for _, lane := range slices.Clone(g.lanes) {
		if l.placeIn(name, g, lane) {
			waits = true
		}
	}
	if !waits && g.held == 0 {
		l.forget(name, g)
	}
}

// forget drops the group, keeping its debts.
func (l *Lock) forget(name string, g *group) {
	for _, lane := range g.lanes {
		if c := g.clock[lane]; c != nil && *c > l.lanes[lane] {
			l.idle[strconv.Itoa(lane)+":"+name] = *c
		}
	}
	for len(l.idle) > IdleGroups {
		// ZPOPMIN: the lowest clock, then the lowest member.
		var least string
		for k, c := range l.idle {
			if least == "" || c < l.idle[least] || (c == l.idle[least] && k < least) {
				least = k
			}
		}
		delete(l.idle, least)
	}
	delete(l.groups, name)
}

// firstOfSet is the first group of lane's set, or nil.
func (l *Lock) firstOfSet(lane int) *string {
	var best *string
	var bc int64
	var bm string
	for name, g := range l.groups {
		m, ok := g.member[lane]
		if !ok {
			continue
		}
		c := *g.clock[lane]
		if best == nil || c < bc || (c == bc && m < bm) {
			best, bc, bm = &name, c, m
		}
	}
	return best
}

// partyLeft: a party of a named group left for good; the last one takes
// grouped mode with it.
func (l *Lock) partyLeft(token string) {
	delete(l.partyOf, token)
	l.grouped--
	if l.grouped > 0 {
		return
	}
	l.groups, l.partyOf, l.idle = nil, nil, map[string]int64{}
	l.lanes, l.mean = [10]int64{}, nil
	for _, h := range l.holders {
		h.record, h.since, h.charged = false, 0, 0
	}
}

// join: a request of a named group joins the parties.
func (l *Lock) join(r Request) {
	if r.Group == "" {
		return
	}
	if l.grouped == 0 {
		l.groups, l.partyOf = map[string]*group{}, map[string]string{}
		g := l.record("")
		g.held = l.used
		for lane := 1; lane <= 9; lane++ {
			if l.head("", lane) != nil {
				l.addLane(g, lane)
			}
		}
		l.place("")
	}
	l.grouped++
	l.partyOf[r.Token] = r.Group
	l.record(r.Group).weight = r.Weight
}

// enqueue puts r at the back of its line; a group whose line was empty
// starts to compete in the lane.
func (l *Lock) enqueue(r Request) {
	l.join(r)
	first := l.head(r.Group, r.Lane) == nil
	l.waiters = append(l.waiters, &waiter{Request: r, arrival: l.arrive(r.Lane)})
	slices.SortStableFunc(l.waiters, func(a, b *waiter) int { return cmp.Compare(a.arrival, b.arrival) })
	if first && l.grouped > 0 {
		g := l.record(r.Group)
		if r.Lane > 0 && g.clock[r.Lane] == nil {
			l.addLane(g, r.Lane)
		}
		l.place(r.Group)
	}
}

// ---- holders, charges and the grant loop ----

func (l *Lock) holds(token string) *holder {
	for _, h := range l.holders {
		if h.Token == token {
			return h
		}
	}
	return nil
}

// underLimit tells whether a request of grp may take n more permits.
func (l *Lock) underLimit(grp string, n int) bool {
	if l.Limit == 0 {
		return true
	}
	held := 0
	switch {
	case l.grouped > 0:
		if g := l.groups[grp]; g != nil {
			held = g.held
		}
	case grp == "":
		held = l.used
	}
	return held+n <= l.Limit
}

func (l *Lock) fits(r Request, grp string) bool {
	return l.used+r.Permits <= l.Capacity && l.underLimit(grp, r.Permits)
}

func (l *Lock) nextFence() int64 {
	l.lastFence = max(l.lastFence+1, l.now)
	return l.lastFence
}

// charge is what a grant of n permits is charged at once.
func charge(n int, mean *int64, lockMean *int64, weight int) int64 {
	m := int64(0)
	switch {
	case mean != nil:
		m = *mean
	case lockMean != nil:
		m = *lockMean
	}
	return max(int64(math.Floor(float64(n)*float64(m)/float64(weight))), 1)
}

func usedSince(now int64, n, weight int, since int64) int64 {
	return int64(math.Floor(float64(n) * float64(max(now-since, 0)) / float64(weight)))
}

// take grants r, in grp, with fence, and tells whether room is left.
func (l *Lock) take(r Request, grp string, fence int64) bool {
	h := &holder{Request: r, fence: fence, deadline: l.nowMs() + l.GrantTTLMs}
	l.holders = append(l.holders, h)
	slices.SortStableFunc(l.holders, func(a, b *holder) int {
		return cmp.Or(cmp.Compare(a.deadline, b.deadline), strings.Compare(a.Token, b.Token))
	})
	l.used += r.Permits
	if l.grouped > 0 {
		g := l.record(grp)
		g.held += r.Permits
		var clock int64
		if _, placed := g.member[r.Lane]; placed {
			clock = *g.clock[r.Lane]
		} else {
			clock = l.startClock(grp, g, r.Lane)
		}
		c := charge(r.Permits, g.mean, l.mean, g.weight)
		g.clock[r.Lane] = ptr(clock + c)
		l.lanes[r.Lane] = max(l.lanes[r.Lane], clock)
		h.record, h.since, h.charged = true, l.now, c
		l.place(grp)
	}
	return l.used < l.Capacity
}

// drop frees what a holder holds, charging its hold.
func (l *Lock) drop(h *holder) {
	l.holders = slices.DeleteFunc(l.holders, func(x *holder) bool { return x == h })
	l.used -= h.Permits
	if l.grouped == 0 {
		return
	}
	grp := l.partyOf[h.Token]
	g := l.record(grp)
	g.held -= h.Permits
	if h.record {
		hold := max(l.now-h.since, 0)
		if g.mean == nil {
			g.mean = ptr(hold)
		} else {
			g.mean = ptr(int64(math.Floor(float64(*g.mean) + float64(hold-*g.mean)/4)))
		}
		if l.mean == nil {
			l.mean = ptr(hold)
		} else {
			l.mean = ptr(int64(math.Floor(float64(*l.mean) + float64(hold-*l.mean)/8)))
		}
		base := l.lanes[h.Lane]
		if c := g.clock[h.Lane]; c != nil {
			base = *c
		}
		g.clock[h.Lane] = ptr(base + usedSince(l.now, h.Permits, g.weight, h.since) - h.charged)
	}
	if grp != "" {
		l.partyLeft(h.Token)
	}
	if l.grouped > 0 {
		l.place(grp)
	}
}

// waiterLeft forgets a waiter taken off its line (dead, or withdrawn).
func (l *Lock) waiterLeft(token, grp string) {
	if l.grouped == 0 {
		return
	}
	if grp != "" {
		l.partyLeft(token)
	}
	if l.grouped > 0 {
		l.place(grp)
	}
}

// grantHeads grants, in order, every live head that fits, and stops at
// the first that does not; dead heads met on the way are dropped.
func (l *Lock) grantHeads() []Grant {
	var grants []Grant
	if l.used >= l.Capacity {
		return nil
	}
	for {
		w := l.nextHead()
		if w == nil {
			break
		}
		grp := l.groupOf(w.Token)
		live := l.alive(w.Request)
		if live && !l.fits(w.Request, grp) {
			break
		}
		if live && l.Check != nil {
			l.Check(w.Request)
		}
		l.removeWaiter(w.Token)
		if !live {
			l.waiterLeft(w.Token, grp)
			continue
		}
		fence := l.nextFence()
		more := l.take(w.Request, grp, fence)
		grants = append(grants, Grant{w.Token, fence})
		if !more {
			break
		}
	}
	return grants
}

func (l *Lock) settle() {
	if l.used == 0 && len(l.waiters) == 0 {
		l.scanAt = nil
	}
}

// ---- scans ----

func (l *Lock) scanDue(everyMs int64) bool {
	if l.scanAt != nil && *l.scanAt > l.nowMs() {
		return false
	}
	l.scanAt = ptr(l.nowMs() + int64(math.Floor(float64(everyMs)*3/4)))
	return true
}

// reapHolders frees what dead holders hold.
func (l *Lock) reapHolders() bool {
	freed := false
	for _, h := range slices.Clone(l.holders) {
		if !l.alive(h.Request) {
			l.drop(h)
			freed = true
		}
	}
	return freed
}

// orderOf sorts waiters as the order set does: lanes above 0 first.
func orderOf(ws []*waiter) []*waiter {
	out := slices.Clone(ws)
	score := func(w *waiter) int64 {
		if w.Lane > 0 {
			return w.arrival - 1<<52
		}
		return w.arrival
	}
	slices.SortStableFunc(out, func(a, b *waiter) int { return cmp.Compare(score(a), score(b)) })
	return out
}

// reapWaiters drops the dead waiters.
func (l *Lock) reapWaiters() {
	type gone struct{ token, grp string }
	var dead []gone
	for _, w := range orderOf(l.waiters) {
		if !l.alive(w.Request) {
			dead = append(dead, gone{w.Token, l.groupOf(w.Token)})
		}
	}
	for _, d := range dead {
		l.removeWaiter(d.token)
	}
	for _, d := range dead {
		l.waiterLeft(d.token, d.grp)
	}
}

// chargeHolds charges each group what its holds have used beyond what was
// charged for them.
func (l *Lock) chargeHolds() {
	if l.grouped == 0 {
		return
	}
	moved := map[string]bool{}
	for _, h := range l.holders {
		if !h.record {
			continue
		}
		grp := l.partyOf[h.Token]
		g := l.record(grp)
		if used := usedSince(l.now, h.Permits, g.weight, h.since); used > h.charged {
			base := l.lanes[h.Lane]
			if c := g.clock[h.Lane]; c != nil {
				base = *c
			}
			g.clock[h.Lane] = ptr(base + used - h.charged)
			h.charged = used
			moved[grp] = true
		}
	}
	for _, grp := range slices.Sorted(mapKeys(moved)) {
		l.place(grp)
	}
}

func mapKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (l *Lock) maintain(everyMs int64, everyHolder bool) bool {
	due := l.scanDue(everyMs)
	freed := false
	if due || everyHolder {
		freed = l.reapHolders()
	}
	if due {
		l.reapWaiters()
		l.chargeHolds()
	}
	return freed
}

// ---- the calls ----

// Acquire is acquire.lua: it takes r at once if it fits and nobody waits,
// else (wait) queues it. scanMs is the calling Locker's heartbeat. It
// returns r's fence (0 if not granted) and every grant the call made, r's
// among them.
func (l *Lock) Acquire(r Request, wait bool, scanMs int64) (fence int64, grants []Grant, err error) {
	if !l.alive(r) {
		return 0, nil, fmt.Errorf("session gone")
	}
	takeNow := func() int64 {
		if !l.fits(r, r.Group) || len(l.waiters) > 0 {
			return 0
		}
		l.join(r)
		f := l.nextFence()
		l.take(r, r.Group, f)
		grants = append(grants, Grant{r.Token, f})
		return f
	}
	fence = takeNow()
	if fence == 0 && !wait && l.maintain(scanMs, false) {
		// Permits came free: they go to the waiters first.
		grants = append(grants, l.grantHeads()...)
		fence = takeNow()
	}
	if fence > 0 {
		return fence, grants, nil
	}
	if !wait {
		l.settle()
		return 0, nil, nil
	}
	l.enqueue(r)
	grants = append(grants, l.grantHeads()...)
	if h := l.holds(r.Token); h != nil {
		for _, g := range grants {
			if g.Token == r.Token {
				fence = g.Fence
			}
		}
	}
	return fence, grants, nil
}

// Release is release.lua: it frees token's permits and grants the heads
// that now fit; released says whether token held any.
func (l *Lock) Release(token string) (released bool, grants []Grant) {
	h := l.holds(token)
	if h == nil {
		return false, nil
	}
	l.drop(h)
	grants = l.grantHeads()
	l.settle()
	return true, grants
}

// Cancel is cancel.lua: token leaves the queue, or gives its grant back.
func (l *Lock) Cancel(token string) (released bool, grants []Grant) {
	grp := l.groupOf(token)
	left := l.removeWaiter(token)
	if left && l.grouped > 0 {
		if grp != "" {
			l.partyLeft(token)
		}
		if l.grouped > 0 {
			l.place(grp)
		}
	}
	h := l.holds(token)
	if h != nil {
		l.drop(h)
	}
	if h != nil || left {
		grants = l.grantHeads()
		l.settle()
	}
	return h != nil, grants
}

// Heartbeat is heartbeat.lua with no waiters to ask about: it drops dead
// holders, scans when due, and grants what came free.
func (l *Lock) Heartbeat(scanMs int64) []Grant {
	l.maintain(scanMs, true)
	return l.grantHeads()
}

// ---- what a test sees ----

// A View is the lock's state, for tests to compare with Redis's.
type View struct {
	Holders    map[string]Held // by token
	Waiters    []Waiting       // in arrival order
	Grouped    int
	Mean       *int64
	LaneClocks [10]int64
	Groups     map[string]GroupView
	Idle       map[string]int64 // "<lane>:<group>" -> clock
}

// Held is a holder as a test sees it.
type Held struct {
	Fence   int64
	Record  bool // charged (granted in grouped mode)
	Since   int64
	Charged int64
}

// Waiting is a waiter as a test sees it: its request, arrival and group.
type Waiting struct {
	Request
	Arrival int64
	Group   string // the group it waits in: "" in plain mode
}

// GroupView is a group's state.
type GroupView struct {
	Held    int
	Mean    *int64
	Weight  int
	Lanes   []int
	Clocks  map[int]int64
	Members map[int]string
}

// Now is the clock, µs.
func (l *Lock) Now() int64 { return l.now }

// View returns the lock's state.
func (l *Lock) View() View {
	v := View{Holders: map[string]Held{}, Grouped: l.grouped, Mean: l.mean, LaneClocks: l.lanes, Groups: map[string]GroupView{}, Idle: map[string]int64{}}
	for _, h := range l.holders {
		v.Holders[h.Token] = Held{Fence: h.fence, Record: h.record, Since: h.since, Charged: h.charged}
	}
	for _, w := range l.waiters {
		v.Waiters = append(v.Waiters, Waiting{Request: w.Request, Arrival: w.arrival, Group: l.groupOf(w.Token)})
	}
	for name, g := range l.groups {
		gv := GroupView{Held: g.held, Mean: g.mean, Weight: g.weight, Lanes: slices.Clone(g.lanes), Clocks: map[int]int64{}, Members: map[int]string{}}
		for lane, c := range g.clock {
			if c != nil {
				gv.Clocks[lane] = *c
			}
		}
		for lane, m := range g.member {
			gv.Members[lane] = m
		}
		v.Groups[name] = gv
	}
	for k, c := range l.idle {
		v.Idle[k] = c
	}
	return v
}

// Level is a waiter's level now.
func (l *Lock) Level(w Waiting) int { return level(l.now, w.Lane, w.Arrival, w.AgingMs) }
