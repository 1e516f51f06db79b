package fairlockhttp

import (
	"cmp"
	"slices"
	"time"

	"github.com/fairlock/fairlock/fairlock"
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

type lockJSON struct {
	Name     string       `json:"name"`
	Kind     string       `json:"kind"`
	Capacity int          `json:"capacity"`
	InUse    int          `json:"in_use"`
	Fence    int64        `json:"fence"`
	Queued   int          `json:"queued"`
	Holders  []holderJSON `json:"holders"`
	Waiters  []waiterJSON `json:"waiters"`
	Groups   []groupJSON  `json:"groups"`
	Lanes    []laneJSON   `json:"lanes"`
}

type holderJSON struct {
	Token    string `json:"token"`
	Lock     string `json:"lock"`
	Permits  int    `json:"permits"`
	Fence    int64  `json:"fence"`
	TTLMs    int64  `json:"ttl_ms"`
	Metadata string `json:"metadata"`
	Group    string `json:"group"`
	Weight   int    `json:"weight"`
	Priority int    `json:"priority"`
}

type waiterJSON struct {
	Token    string `json:"token"`
	Lock     string `json:"lock"`
	Permits  int    `json:"permits"`
	Position int    `json:"position"`
	TTLMs    int64  `json:"ttl_ms"`
	WaitedMs int64  `json:"waited_ms"`
	Metadata string `json:"metadata"`
	Group    string `json:"group"`
	Weight   int    `json:"weight"`
	Priority int    `json:"priority"`
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
// groups and lanes count every waiter listed.
func lockOf(st fairlock.State, waiters int) lockJSON {
	out := lockJSON{Name: st.Name, Kind: st.Kind.String(), Capacity: st.Capacity, InUse: st.InUse, Fence: st.Fence, Queued: st.Queued,
		Holders: []holderJSON{}, Waiters: []waiterJSON{}, Groups: groupsOf(st), Lanes: lanesOf(st)}
	for _, h := range st.Holders {
		out.Holders = append(out.Holders, holderJSON{Token: h.Token, Lock: lockName(st.Kind, h.Shared), Permits: h.Permits, Fence: h.Fence,
			TTLMs: h.TTL.Milliseconds(), Metadata: h.Metadata, Group: h.Group, Weight: h.Weight, Priority: h.Priority})
	}
	for _, w := range st.Waiters[:min(waiters, len(st.Waiters))] {
		out.Waiters = append(out.Waiters, waiterJSON{Token: w.Token, Lock: lockName(st.Kind, w.Shared), Permits: w.Permits,
			Position: w.Position, TTLMs: w.TTL.Milliseconds(), WaitedMs: w.Waited.Milliseconds(), Metadata: w.Metadata,
			Group: w.Group, Weight: w.Weight, Priority: w.Priority})
	}
	return out
}

// lockName names what a party asks for: "read" or "write" on a read-write
// lock, else the kind, as the fairlock command's JSON does.
func lockName(k fairlock.LockKind, shared bool) string {
	switch {
	case k != fairlock.LockRWMutex:
		return k.String()
	case shared:
		return "read"
	}
	return "write"
}

// groupsOf is the groups of st's holders and waiters, in the order they
// first appear, or none when nobody names a group.
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
