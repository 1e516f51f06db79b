package history

import (
	"slices"
	"testing"
)

// req is a request for p permits, called at c, in line at e, granted at g
// with fence f and ended at end; g or end 0 for Never.
func req(p, c, e, g, f, end int64) Request {
	r := Request{Permits: p, Called: c, Entered: e, Granted: g, Fence: f, End: end}
	if g == 0 {
		r.Granted = Never
	}
	if end == 0 {
		r.End = Never
	}
	return r
}

func lost(r Request) Request   { r.Lost = true; return r }
func exempt(r Request) Request { r.Exempt = true; return r }

// rules returns the rules that the checks find l broke, each once, in
// order.
func rules(l Lock) []Rule {
	var out []Rule
	for _, v := range slices.Concat(l.CheckCapacity(), l.CheckFences(), l.CheckFIFO()) {
		out = append(out, v.Rule)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

const all = 1 << 30 // a read-write lock's capacity, which a writer takes

// The checks catch what they claim to catch, and accept what the locks
// may do: share, and grant several requests at once, seen in any order.
func TestChecks(t *testing.T) {
	for _, c := range []struct {
		name string
		cap  int64
		reqs []Request
		want []Rule
	}{
		// An end is stamped before it happened, a grant seen after: the two
		// at one instant do not overlap.
		{"mutex hand-off at one instant", 1, []Request{req(1, 1, 2, 2, 10, 4), req(1, 3, 4, 4, 11, 6)}, nil},
		{"mutex overlap", 1, []Request{req(1, 1, 2, 2, 10, 5), req(1, 3, 4, 4, 11, 6)}, []Rule{OverCapacity}},
		{"semaphore shares within capacity", 3, []Request{req(2, 1, 2, 2, 10, 10), req(1, 3, 4, 4, 11, 12), req(2, 5, 6, 11, 12, 20)}, nil},
		{"semaphore over capacity", 3, []Request{req(2, 1, 2, 2, 10, 5), req(2, 3, 4, 4, 11, 6)}, []Rule{OverCapacity}},
		// The 1 fits beside the holder's 2, but the 3 waits ahead of it.
		{"head-of-line", 3, []Request{req(2, 1, 2, 2, 10, 10), req(3, 3, 4, 11, 12, 12), req(1, 5, 7, 7, 11, 10)}, []Rule{FIFO}},
		{"head never granted", 3, []Request{req(3, 1, 2, 2, 10, 10), req(3, 3, 4, 0, 0, 0), req(1, 5, 6, 11, 11, 12)}, []Rule{FIFO}},
		{"exempt head never granted", 3, []Request{req(3, 1, 2, 2, 10, 10), exempt(req(3, 3, 4, 0, 0, 0)), req(1, 5, 6, 11, 11, 12)}, nil},
		// One release grants the second and third together; the third is
		// seen first.
		{"grants together, seen out of order", 3, []Request{req(3, 1, 2, 2, 10, 10), req(1, 3, 4, 12, 11, 13), req(2, 5, 6, 11, 12, 14)}, nil},
		// Grants that share are ordered only by a call after one was seen.
		{"shared grant seen before a call", 3, []Request{req(1, 1, 2, 2, 12, 5), req(1, 3, 4, 4, 11, 6)}, []Rule{FenceAfterCall, FIFO}},
		{"shared grants seen out of fence order", 3, []Request{req(1, 1, 2, 3, 12, 5), req(1, 2, 4, 4, 11, 6)}, nil},
		// The first asked first, but waited for the second's permits.
		{"exclusive grants seen out of fence order", 3, []Request{req(2, 0, 1, 4, 11, 5), req(2, 1, 2, 2, 12, 3)}, []Rule{FenceOrder}},
		{"lost grant seen late", 3, []Request{req(2, 0, 1, 4, 11, 5), lost(req(2, 1, 2, 2, 12, 3))}, nil},
		{"fence twice", 3, []Request{req(1, 1, 2, 2, 10, 0), req(1, 1, 3, 3, 10, 0)}, []Rule{FenceTwice}},
		{"readers share, writer waits its turn", all, []Request{
			req(1, 1, 2, 2, 10, 11), req(1, 3, 4, 4, 11, 12), req(all, 5, 6, 13, 12, 14),
			req(1, 7, 8, 16, 13, 17), req(1, 9, 10, 15, 14, 18),
		}, nil},
		{"writer beside a reader", all, []Request{req(1, 1, 2, 2, 10, 5), req(all, 3, 4, 4, 11, 6)}, []Rule{OverCapacity}},
		{"reader passes a waiting writer", all, []Request{req(1, 1, 2, 2, 10, 10), req(all, 3, 4, 13, 12, 14), req(1, 5, 6, 6, 11, 12)}, []Rule{FIFO}},
		{"writer's fence below a reader's", all, []Request{req(1, 1, 2, 2, 12, 5), req(all, 1, 1, 6, 11, 7)}, []Rule{FenceOrder}},
	} {
		if got := rules(Lock{Cap: c.cap, Reqs: c.reqs}); !slices.Equal(got, c.want) {
			t.Errorf("%s: broke %v, want %v", c.name, got, c.want)
		}
	}
}

// Holds goes through the grants in the order seen, with what held then.
func TestHolds(t *testing.T) {
	l := Lock{Cap: 3, Reqs: []Request{req(2, 1, 2, 11, 12, 20), req(2, 1, 2, 2, 10, 10), req(1, 3, 4, 4, 11, 12), req(1, 5, 6, 0, 0, 0)}}
	var got [][]int
	l.Holds(func(r int, held []int) { got = append(got, append([]int{r}, held...)) })
	if want := [][]int{{1}, {2, 1}, {0, 2}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("Holds: got %v, want %v", got, want)
	}
}
