package fairlockhttp

import (
	"cmp"
	"slices"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/lockjson"
)

// The JSON of locks.json, described in the package's documentation.

type pageJSON struct {
	ReadAt       time.Time  `json:"read_at"`
	RefreshMs    int64      `json:"refresh_ms"`
	ForceRelease bool       `json:"force_release"`
	InUse        int        `json:"in_use"`
	Matching     int        `json:"matching"`
	Page         int        `json:"page"`
	Pages        int        `json:"pages"`
	PerPage      int        `json:"per_page"`
	Locks        []lockJSON `json:"locks"`
	Error        string     `json:"error,omitempty"`
}

// lockJSON is the fairlock command's LOCK (list -json), with the lock's
// groups and priority lanes.
type lockJSON struct {
	lockjson.Lock
	Groups []groupJSON `json:"groups"`
	Lanes  []laneJSON  `json:"lanes"`
}

type groupJSON struct {
	Group     string  `json:"group"`
	Weight    int     `json:"weight"`
	Holders   int     `json:"holders"`
	Held      int     `json:"held"`
	Waiting   int     `json:"waiting"`
	Share     float64 `json:"share"`
	FairShare float64 `json:"fair_share"`
}

type laneJSON struct {
	Priority      int   `json:"priority"`
	Holders       int   `json:"holders"`
	Waiting       int   `json:"waiting"`
	LongestWaitMs int64 `json:"longest_wait_ms"`
}

// lockOf is st as locks.json shows it, with at most waiters waiters; its
// groups and lanes count every waiter listed. Its holders are in the order
// they were granted, by fence: Inspect lists a semaphore's or read-write
// lock's by lease deadline, which each renewal changes, and a page read
// again every second would shuffle its rows.
func lockOf(st fairlock.State, waiters int) lockJSON {
	out := lockJSON{Lock: lockjson.Of(st, waiters), Groups: groupsOf(st), Lanes: lanesOf(st)}
	slices.SortStableFunc(out.Holders, func(a, b lockjson.Holder) int { return cmp.Compare(a.Fence, b.Fence) })
	return out
}

// groupsOf is the groups of st's holders and waiters, by name (so that a
// page read again shows them in the same order), or none when nobody
// names a group.
func groupsOf(st fairlock.State) []groupJSON {
	var out []groupJSON
	at := map[string]int{}
	group := func(name string, weight int) *groupJSON {
		i, ok := at[name]
		if !ok {
			i = len(out)
			at[name] = i
			out = append(out, groupJSON{Group: name, Weight: weight})
		}
		return &out[i]
	}
	named := false
	for _, h := range st.Holders {
		g := group(h.Group, h.Weight)
		g.Holders++
		g.Held += h.Permits
		named = named || h.Group != ""
	}
	for _, w := range st.Waiters {
		group(w.Group, w.Weight).Waiting++
		named = named || w.Group != ""
	}
	if !named {
		return []groupJSON{}
	}
	slices.SortFunc(out, func(a, b groupJSON) int { return cmp.Compare(a.Group, b.Group) })
	weights := 0
	for _, g := range out {
		weights += g.Weight
	}
	for i := range out {
		if st.Capacity > 0 {
			out[i].Share = float64(out[i].Held) / float64(st.Capacity)
		}
		out[i].FairShare = float64(out[i].Weight) / float64(weights)
	}
	return out
}

// lanesOf is st's priorities, highest first, or none when every party's
// is 0.
func lanesOf(st fairlock.State) []laneJSON {
	var out []laneJSON
	lane := func(p int) *laneJSON {
		for i := range out {
			if out[i].Priority == p {
				return &out[i]
			}
		}
		out = append(out, laneJSON{Priority: p})
		return &out[len(out)-1]
	}
	above := false
	for _, h := range st.Holders {
		lane(h.Priority).Holders++
		above = above || h.Priority > 0
	}
	for _, w := range st.Waiters {
		l := lane(w.Priority)
		l.Waiting++
		l.LongestWaitMs = max(l.LongestWaitMs, w.Waited.Milliseconds())
		above = above || w.Priority > 0
	}
	if !above {
		return []laneJSON{}
	}
	slices.SortFunc(out, func(a, b laneJSON) int { return cmp.Compare(b.Priority, a.Priority) })
	return out
}
