package main

import "math"

// The plots are drawn from results.json alone (so that -report-only redraws
// them), and results.json keeps no grant records: what they need of the
// records is summed up here, in a few dozen numbers a row.

// histPerDecade is a WaitHist's resolution: 20 buckets per factor of ten,
// each 12% wider than the one before, fine enough for a distribution drawn
// on a log scale and small enough for results.json (a wait spread over
// four decades takes 80 counts).
const histPerDecade = 20

// histLoUs is the lower edge of a WaitHist's bucket 0, in µs: below any
// wait for a lock on Redis, which is at least a round trip.
const histLoUs = 1.0

// WaitHist is a distribution of waits in buckets spaced evenly on a log
// scale: bucket k holds the waits from LoUs·10^(k/PerDecade) µs up to the
// next bucket's edge (bucket 0 also those below it), and Counts[i] is the
// count of bucket First+i. Counts runs from the first bucket that holds a
// wait to the last.
type WaitHist struct {
	LoUs      float64 `json:"lo_us"`
	PerDecade int     `json:"per_decade"`
	First     int     `json:"first"`
	Counts    []int64 `json:"counts"`
}

// newWaitHist sums waits (ns) up into a WaitHist; nil for none.
func newWaitHist(waits []int64) *WaitHist {
	if len(waits) == 0 {
		return nil
	}
	idx := make([]int, len(waits))
	lo, hi := math.MaxInt, 0
	for i, w := range waits {
		k := 0
		if us := float64(w) / 1e3; us > histLoUs {
			k = int(math.Log10(us/histLoUs) * histPerDecade)
		}
		idx[i], lo, hi = k, min(lo, k), max(hi, k)
	}
	h := &WaitHist{LoUs: histLoUs, PerDecade: histPerDecade, First: lo, Counts: make([]int64, hi-lo+1)}
	for _, k := range idx {
		h.Counts[k-lo]++
	}
	return h
}

// edgeUs is the lower edge of bucket First+i, in µs.
func (h *WaitHist) edgeUs(i int) float64 {
	return h.LoUs * math.Pow(10, float64(h.First+i)/float64(h.PerDecade))
}

// total is the count of waits in h.
func (h *WaitHist) total() int64 {
	var n int64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// ccdf is the fraction of waits longer than x, at x the lower edge of every
// bucket and the upper edge of every bucket but the last (where it is 0,
// which a log scale cannot show): xs in µs, falling from 1.
func (h *WaitHist) ccdf() (xs, fracs []float64) {
	n := h.total()
	if n == 0 {
		return nil, nil
	}
	left := n
	xs, fracs = append(xs, h.edgeUs(0)), append(fracs, 1)
	for i, c := range h.Counts[:len(h.Counts)-1] {
		left -= c
		xs, fracs = append(xs, h.edgeUs(i+1)), append(fracs, float64(left)/float64(n))
	}
	return xs, fracs
}

// windowWaits are the waits (call to grant, ns) of the grants of recs in
// the window [startAt, endAt] that keep selects, nil for all: the grants
// that a row's figures count.
func windowWaits(recs []rec, startAt, endAt int64, keep func(rec) bool) []int64 {
	var waits []int64
	for _, x := range recs {
		if x.TG < startAt || x.TG > endAt || keep != nil && !keep(x) {
			continue
		}
		waits = append(waits, x.TG-x.T0)
	}
	return waits
}

// shareBuckets is the number of time buckets a tenants row's window is cut
// into for its shares over time: 500 ms each in the default 10 s, enough
// grants in each (a quiet tenant's are over 100) for a share to mean
// something.
const shareBuckets = 20

// grantsPerBucket counts the grants of recs in the window [startAt, endAt]
// by group (groupOf, from 0 to groups-1; another value is left out) and by
// time bucket, the window cut into buckets.
func grantsPerBucket(recs []rec, startAt, endAt int64, buckets, groups int, groupOf func(rec) int) [][]int {
	out := make([][]int, groups)
	for g := range out {
		out[g] = make([]int, buckets)
	}
	width := float64(endAt-startAt) / float64(buckets)
	for _, x := range recs {
		g := groupOf(x)
		if x.TG < startAt || x.TG > endAt || g < 0 || g >= groups {
			continue
		}
		out[g][min(int(float64(x.TG-startAt)/width), buckets-1)]++
	}
	return out
}
