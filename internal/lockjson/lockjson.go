// Package lockjson is the JSON of one lock's state that the fairlock
// command prints (inspect -json, list -json) and the operator page of
// package fairlockhttp reads: one schema, so that a script written against
// the one reads the other. The schema is documented with the command
// (cmd/fairlock/show.go).
package lockjson

import "github.com/fairlock/fairlock/fairlock"

// A Lock is a lock's state: its holders and its waiters in queue order.
type Lock struct {
	Name     string   `json:"name"`
	Kind     string   `json:"kind"`
	Capacity int      `json:"capacity"`
	InUse    int      `json:"in_use"`
	Fence    int64    `json:"fence"`
	Queued   int      `json:"queued"`
	Holders  []Holder `json:"holders"`
	Waiters  []Waiter `json:"waiters"`
}

// A Holder is one lease of the lock.
type Holder struct {
	Token    string `json:"token"`
	Lock     string `json:"lock"`
	Permits  int    `json:"permits"`
	Fence    int64  `json:"fence"`
	TTLMs    int64  `json:"ttl_ms"`
	Metadata string `json:"metadata"`
	Group    string `json:"group"`
	Weight   int    `json:"weight"`
	Priority int    `json:"priority"`
	Multi    string `json:"multi"`
}

// A Waiter is one request in the lock's queue.
type Waiter struct {
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
	Multi    string `json:"multi"`
}

// Of is st as JSON, with its first waiters waiters at most; its arrays are
// empty, never nil, so that they are [] and not null.
func Of(st fairlock.State, waiters int) Lock {
	out := Lock{Name: st.Name, Kind: st.Lock.String(), Capacity: st.Capacity, InUse: st.InUse, Fence: st.Fence, Queued: st.Queued,
		Holders: []Holder{}, Waiters: []Waiter{}}
	for _, h := range st.Holders {
		out.Holders = append(out.Holders, Holder{Token: h.Token, Lock: Asked(st.Lock, h.Shared), Permits: h.Permits, Fence: h.Fence,
			TTLMs: h.TTL.Milliseconds(), Metadata: h.Metadata, Group: h.Group, Weight: h.Weight, Priority: h.Priority, Multi: h.Multi})
	}
	for _, w := range st.Waiters[:min(max(waiters, 0), len(st.Waiters))] {
		out.Waiters = append(out.Waiters, Waiter{Token: w.Token, Lock: Asked(st.Lock, w.Shared), Permits: w.Permits,
			Position: w.Position, TTLMs: w.TTL.Milliseconds(), WaitedMs: w.Waited.Milliseconds(), Metadata: w.Metadata,
			Group: w.Group, Weight: w.Weight, Priority: w.Priority, Multi: w.Multi})
	}
	return out
}

// Asked names what a holder or waiter of a lock of kind k asks for:
// "read" or "write" on a kind whose requests may share it (a read-write
// lock), else the kind.
func Asked(k fairlock.LockKind, shared bool) string {
	switch info, err := k.Info(); {
	case err != nil || !info.Shared:
		return k.String()
	case shared:
		return "read"
	}
	return "write"
}
