// Package history checks what was seen of a fair lock's life against the
// promises of every kind of lock in fairlock: no more permits held than
// the lock has, fences that increase in grant order, grants in queue
// order. A mutex is a lock of one permit, a read-write lock one of
// MaxCapacity whose readers take one and writers all, as in the engine.
//
// What is seen comes late, and grants made together by one script may be
// seen in any order. So the checks judge order only where it is certain,
// and want times stamped so that what was seen lies inside what happened:
// a grant or an entry in line after it happened, a call or an end before.
// Then a history they reject broke a promise; it is not only how it was
// seen. They take plain data, so that the root fault suite and
// fairlocktest's Recorder share them.
package history

import (
	"cmp"
	"math"
	"slices"
	"sort"
)

// Never is the time of what did not happen: a grant not made, or the end
// of a lease still held. It is also the Cap of a lock whose capacity is not
// known: no two grants then exclude each other.
const Never = math.MaxInt64

// A Request is one call for a lock, as seen. Its times are on a clock that
// all the requests of a lock share.
type Request struct {
	Permits int64 // what it took of the lock's Cap
	Called  int64 // before it was made; math.MinInt64 if unknown
	Entered int64 // after it took its place in line (queued, or granted at once)
	Granted int64 // after it was granted; Never if it was not
	Fence   int64
	End     int64 // before its hold ended; Never if it is still held
	Lost    bool  // the lease ran out, maybe before its grant was seen: that time orders nothing
	Exempt  bool  // left out of FIFO: nothing says where it stood in line (a faulted process, a failed call)
}

// A Lock is one lock's requests: they share its permits, queue and fences.
type Lock struct {
	Cap  int64
	Reqs []Request
}

// A Rule is what a Violation broke.
type Rule int

// The rules.
const (
	OverCapacity   Rule = iota + 1 // Req was granted while Others held, more permits than Cap
	FenceTwice                     // Req got the fence of Others[0]
	FenceAfterCall                 // Others[0] was seen granted before Req was called, with a fence no lower
	FenceOrder                     // Others[0] and Req exclude each other, Others[0] was seen granted first, with a fence no lower
	FIFO                           // Others[0] was in line before Req was called, and was granted after it or not at all
)

// A Violation is a broken rule: the grant that broke it and the requests
// it broke it against, as indices in Lock.Reqs.
type Violation struct {
	Rule   Rule
	Req    int
	Others []int
}

// granted returns the requests granted, in the order their grants were
// seen.
func (l Lock) granted() []int {
	var out []int
	for i, r := range l.Reqs {
		if r.Granted != Never {
			out = append(out, i)
		}
	}
	slices.SortStableFunc(out, func(a, b int) int { return cmp.Compare(l.Reqs[a].Granted, l.Reqs[b].Granted) })
	return out
}

// Holds calls f at each grant, in the order seen, with the requests that
// held just before it: granted earlier, and not ended by then. held is
// f's to read only until it returns.
func (l Lock) Holds(f func(r int, held []int)) {
	var held []int
	for _, i := range l.granted() {
		t := l.Reqs[i].Granted
		held = slices.DeleteFunc(held, func(h int) bool { return l.Reqs[h].End <= t })
		f(i, held)
		held = append(held, i)
	}
}

// CheckCapacity returns a violation for each grant that took more permits
// than its holders left: two holders of a mutex, a writer beside another
// holder, a semaphore over its capacity.
func (l Lock) CheckCapacity() []Violation {
	var vs []Violation
	l.Holds(func(r int, held []int) {
		n := l.Reqs[r].Permits
		for _, h := range held {
			n += l.Reqs[h].Permits
		}
		if n > l.Cap {
			vs = append(vs, Violation{OverCapacity, r, slices.Clone(held)})
		}
	})
	return vs
}

// CheckFences returns a violation for each grant whose fence is not above
// that of a grant certainly made before it, and for each fence given
// twice. A grant was certainly made before another if it was seen before
// the other was called; or if the two exclude each other, neither lease
// was lost, and it was seen first: the other could not start before it
// ended, which was after its grant was seen. A lost lease may have been
// seen granted late, so only the first reason orders it.
func (l Lock) CheckFences() []Violation {
	order := l.granted()
	fence := func(i int) int64 { return l.Reqs[i].Fence }
	vs := l.before(FenceAfterCall, slices.Clone(order), func(r Request) int64 { return r.Granted }, fence)
	// Which grants exclude each other depends on their permits only, so the
	// highest fence so far of each number of permits is enough to compare.
	var tops []int
	for _, i := range order {
		r, mine := l.Reqs[i], -1
		if r.Lost {
			continue
		}
		for k, t := range tops {
			if l.Reqs[t].Permits > l.Cap-r.Permits && fence(t) >= r.Fence { // they exclude each other
				vs = append(vs, Violation{FenceOrder, i, []int{t}})
			}
			if l.Reqs[t].Permits == r.Permits {
				mine = k
			}
		}
		if mine < 0 {
			tops = append(tops, i)
		} else if r.Fence > fence(tops[mine]) {
			tops[mine] = i
		}
	}
	byFence := slices.Clone(order)
	slices.SortStableFunc(byFence, func(a, b int) int { return cmp.Compare(fence(a), fence(b)) })
	for k := 1; k < len(byFence); k++ {
		if fence(byFence[k]) == fence(byFence[k-1]) {
			vs = append(vs, Violation{FenceTwice, byFence[k], []int{byFence[k-1]}})
		}
	}
	return vs
}

// CheckFIFO returns a violation for each grant made before that of a
// request that had entered the line before it was called, even if it fit
// beside what was held (the head-of-line rule). Exempt requests are left
// out. Grant order is fence order, which Redis hands out in grant order
// and within one script in queue order, while grants made together may be
// seen in any order; CheckFences holds the fences to what was seen.
func (l Lock) CheckFIFO() []Violation {
	var line []int
	for i, r := range l.Reqs {
		if !r.Exempt {
			line = append(line, i)
		}
	}
	return l.before(FIFO, line, func(r Request) int64 { return r.Entered }, func(i int) int64 {
		if l.Reqs[i].Granted == Never {
			return Never
		}
		return l.Reqs[i].Fence
	})
}

// before returns a violation of rule for each granted request of reqs
// whose key is not above the keys of all the requests of reqs whose time
// came before it was called. It sorts reqs by time.
func (l Lock) before(rule Rule, reqs []int, time func(Request) int64, key func(int) int64) []Violation {
	slices.SortStableFunc(reqs, func(a, b int) int { return cmp.Compare(time(l.Reqs[a]), time(l.Reqs[b])) })
	top := slices.Clone(reqs) // top[k] is the request of highest key among reqs[:k+1]
	for k := 1; k < len(top); k++ {
		if key(top[k-1]) > key(top[k]) {
			top[k] = top[k-1]
		}
	}
	var vs []Violation
	for _, i := range reqs {
		k := sort.Search(len(reqs), func(k int) bool { return time(l.Reqs[reqs[k]]) >= l.Reqs[i].Called })
		if l.Reqs[i].Granted != Never && k > 0 && top[k-1] != i && key(top[k-1]) >= key(i) {
			vs = append(vs, Violation{rule, i, []int{top[k-1]}})
		}
	}
	return vs
}
