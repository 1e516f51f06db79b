package fairlock_test

// TestStateMachine drives the engine through random sequences of
// operations and faults (pgregory.net/rapid), on a real redis-server, with
// three Lockers, each behind its own proxy, on a mutex, a semaphore of 3
// permits, a read-write lock, and a semaphore of 3 permits shared by
// groups (WithGroup, the groups "", "a" and "b", WithGroupLimit 2). rapid shrinks a failure to a short
// sequence and prints it.
//
// Actions: Acquire (waits until queued or granted), TryAcquire, Release,
// Extend, Cancel of a waiting call, Do whose fn returns or panics, a Locker
// that dies (its network is cut for good), time passing beyond the lease
// and waiter TTLs, SCRIPT FLUSH, FLUSHALL, and a reply lost after Redis ran
// the command (with go-redis's retries on or off, per Locker).
//
// After every step, reading Redis with a raw client:
//   - every key has an expiry;
//   - each queue's list and its order set hold the same tokens in the same
//     order, without repeats (with groups: the groups' lines together hold
//     the order set's tokens, each line in arrival order); a semaphore's
//     count of permits in use equals the sum over its holders, and so does
//     each group's;
//   - permits held never exceed the capacity, and a writer holds alone; no
//     group holds more than its limit;
//   - no fence is handed out twice, a seeded fence counter is at least
//     every fence seen, and a grant's fence exceeds those of the grants
//     released before its Acquire began;
//   - live waiters are granted in arrival order, with the head-of-line
//     rule: a later waiter of the same generation (no fault in between, a
//     live Locker, never requeued) and of the same group is never granted
//     before an earlier one.
//
// And after time passed beyond the TTLs (the stated bound: lease TTL + a
// heartbeat + slack): every live holder in Redis is a lease the test holds,
// every live waiter a call the test still waits on, so a caller told that
// its call failed holds nothing; a dead Locker holds nothing.
// At the end of each sequence every Locker is closed: no live holder or
// waiter is left, every key still has a TTL (a dead Locker's records
// expire), and goleak (TestMain) finds no goroutine left running.
//
// The default budget fits CI; for more, run locally
//
//	go test -run TestStateMachine ./fairlock/ -rapid.checks=400 -rapid.steps=40
//
// The machine runs on real time, so a shrunk sequence does not replay
// reliably from rapid's fail file: each failure it found is kept as a test
// of its own instead (a group taking permits at once past its limit:
// TestGroupLimit; the fast path leaving an unseeded fence counter:
// TestFastPathSeedsTheFence).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"
)

// The machine's TTLs: a heartbeat every 200 ms.
const (
	smLeaseTTL = 600 * time.Millisecond
	smWaiter   = 600 * time.Millisecond
	smBeat     = 200 * time.Millisecond
)

type smLock struct {
	name  string
	kind  fairlock.LockKind
	cap   int
	limit int // WithGroupLimit; > 0: its calls draw a group
}

var smLocks = []smLock{{"m", fairlock.LockMutex, 1, 0}, {"s", fairlock.LockSemaphore, 3, 0},
	{"r", fairlock.LockRWMutex, fairlock.MaxCapacity, 0}, {"g", fairlock.LockSemaphore, 3, 2}}

// smGroups are the groups of the grouped semaphore: "" names none.
var smGroups = []string{"", "a", "b"}

type smLocker struct {
	l     *fairlock.Locker
	px    *redistest.Proxy
	dead  bool
	retry bool // go-redis retries a lost reply
}

// An smCall is one Acquire or Do under way.
type smCall struct {
	locker, lock int
	permits      int // the weight Redis counts: a writer all of MaxCapacity
	group        string
	arrival      int // when it was queued, in steps; 0 if not (yet)
	gen          int // the generation it queued in
	requeued     bool
	started      time.Time
	cancel       context.CancelFunc
	queued       chan struct{}
	done         chan result
}

type smLease struct {
	lease        *fairlock.Lease
	locker, lock int
	permits      int
	group        string
	arrival, gen int // its call's
	requeued     bool
	granted      time.Time
}

type smGrant struct {
	fence    int64
	started  time.Time // when its Acquire began
	released time.Time // zero while held
}

type machine struct {
	t       *testing.T
	srv     *redistest.Server
	rdb     *redis.Client
	reader  *fairlock.Locker // on rdb, for Inspect
	lockers []*smLocker
	step    int
	gen     int       // bumped by every fault that may reorder or forget waiters
	faultAt time.Time // the last such fault
	calls   []*smCall
	leases  []*smLease
	grants  map[int][]*smGrant // by lock
	maxSeen map[int]int64

	mu      sync.Mutex
	pending map[[2]int]*smCall // by locker and lock: at most one each
}

func (m *machine) init(rt *rapid.T) {
	m.rdb.FlushAll(context.Background())
	m.lockers = nil
	m.calls, m.leases = nil, nil
	m.grants, m.maxSeen = map[int][]*smGrant{}, map[int]int64{}
	m.pending = map[[2]int]*smCall{}
	m.step, m.gen = 0, 0
	for i := range 3 {
		px := redistest.StartProxy(m.t, m.srv.Addr)
		retry := rapid.Bool().Draw(rt, fmt.Sprintf("retry%d", i))
		opt := &redis.Options{Addr: px.Addr, MaxRetries: -1}
		if retry {
			opt.MaxRetries = 3
		}
		c := redis.NewClient(opt)
		i := i
		l, err := fairlock.New(c, fairlock.WithLeaseTTL(smLeaseTTL), fairlock.WithWaiterTTL(smWaiter),
			fairlock.WithObserver(func(e fairlock.Event) { m.observed(i, e) }))
		if err != nil {
			rt.Fatal(err)
		}
		m.lockers = append(m.lockers, &smLocker{l: l, px: px, retry: retry})
		rt.Cleanup(func() {
			l.Close()
			c.Close()
			px.Close()
		})
	}
}

// observed notes a waiter that lost its place and queued again: it no
// longer stands where it arrived.
func (m *machine) observed(locker int, e fairlock.Event) {
	if e.Kind != fairlock.EventCancelled || !errors.Is(e.Err, fairlock.ErrPlaceLost) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, c := range m.pending {
		if key[0] == locker && smLocks[key[1]].name == e.Name && smLocks[key[1]].kind == kindOfEvent(e.Lock) {
			c.requeued = true
		}
	}
}

func kindOfEvent(lk fairlock.LockKind) fairlock.LockKind {
	if lk == fairlock.LockRead || lk == fairlock.LockWrite {
		return fairlock.LockRWMutex
	}
	return lk
}

// fault starts a new generation: FIFO is checked within one only.
func (m *machine) fault() {
	m.gen++
	m.faultAt = time.Now()
}

// sinceFault is how long ago the last fault was. A lost reply counts from
// when a proxy lost it, which may be long after LoseReply armed it, and
// starts a generation of its own then.
func (m *machine) sinceFault() time.Duration {
	for _, l := range m.lockers {
		if at := l.px.DroppedAt(); at.After(m.faultAt) {
			m.gen++
			m.faultAt = at
		}
	}
	return time.Since(m.faultAt)
}

func (m *machine) alive(rt *rapid.T) int {
	var live []int
	for i, l := range m.lockers {
		if !l.dead {
			live = append(live, i)
		}
	}
	if len(live) == 0 {
		rt.Skip("every Locker is dead")
	}
	return rapid.SampledFrom(live).Draw(rt, "locker")
}

// acquirer is the call a request makes on a Locker.
func (m *machine) acquirer(i, lock int, permits int, group string, write, try bool) func(context.Context, ...fairlock.AcquireOption) (*fairlock.Lease, error) {
	l, lk := m.lockers[i].l, smLocks[lock]
	switch lk.kind {
	case fairlock.LockSemaphore:
		s := m.semaphore(l, lk)
		take := s.Acquire
		if try {
			take = s.TryAcquire
		}
		return func(ctx context.Context, o ...fairlock.AcquireOption) (*fairlock.Lease, error) {
			if group != "" {
				o = append(o, fairlock.WithGroup(group))
			}
			return take(ctx, permits, o...)
		}
	case fairlock.LockRWMutex:
		rw, _ := l.RWMutex(lk.name)
		switch {
		case write && try:
			return rw.TryLock
		case write:
			return rw.Lock
		case try:
			return rw.TryRLock
		}
		return rw.RLock
	}
	mu, _ := l.Mutex(lk.name)
	if try {
		return mu.TryAcquire
	}
	return mu.Acquire
}

func (m *machine) semaphore(l *fairlock.Locker, lk smLock) *fairlock.Semaphore {
	var opts []fairlock.SemaphoreOption
	if lk.limit > 0 {
		opts = append(opts, fairlock.WithGroupLimit(lk.limit))
	}
	s, _ := l.Semaphore(lk.name, lk.cap, opts...)
	return s
}

// request draws what a call asks for. A request of the grouped semaphore
// asks for no more than its group may hold.
func (m *machine) request(rt *rapid.T, lock int) (permits int, group string, write bool) {
	switch lk := smLocks[lock]; lk.kind {
	case fairlock.LockSemaphore:
		most := lk.cap
		if lk.limit > 0 {
			group = rapid.SampledFrom(smGroups).Draw(rt, "group")
			most = lk.limit
		}
		return rapid.IntRange(1, most).Draw(rt, "permits"), group, false
	case fairlock.LockRWMutex:
		if write = rapid.Bool().Draw(rt, "write"); write {
			return fairlock.MaxCapacity, "", true
		}
	}
	return 1, "", write
}

func (m *machine) Acquire(rt *rapid.T) {
	i := m.alive(rt)
	lock := rapid.IntRange(0, len(smLocks)-1).Draw(rt, "lock")
	m.mu.Lock()
	busy := m.pending[[2]int{i, lock}] != nil
	m.mu.Unlock()
	if busy {
		rt.Skip("one waiting call per Locker and lock")
	}
	permits, group, write := m.request(rt, lock)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	c := &smCall{locker: i, lock: lock, permits: permits, group: group, gen: m.gen, started: time.Now(), cancel: cancel,
		queued: make(chan struct{}), done: make(chan result, 1)}
	acquire := m.acquirer(i, lock, permits, group, write, false)
	var once sync.Once
	go func() {
		s, err := acquire(ctx, fairlock.OnQueued(func(int) { once.Do(func() { close(c.queued) }) }))
		c.done <- result{s, err}
	}()
	m.mu.Lock()
	m.pending[[2]int{i, lock}] = c
	m.mu.Unlock()
	m.calls = append(m.calls, c)
	select {
	case <-c.queued:
		c.arrival = m.step
	case r := <-c.done:
		c.done <- r // harvested by Check
	case <-time.After(smLeaseTTL + smBeat):
		// Neither queued nor granted: a fault holds it up. It is checked
		// as it ends.
	}
}

func (m *machine) TryAcquire(rt *rapid.T) {
	i := m.alive(rt)
	lock := rapid.IntRange(0, len(smLocks)-1).Draw(rt, "lock")
	permits, group, write := m.request(rt, lock)
	started := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := m.acquirer(i, lock, permits, group, write, true)(ctx)
	if err == nil {
		m.granted(rt, &smCall{locker: i, lock: lock, permits: permits, group: group, gen: m.gen, started: started}, s)
	}
}

// granted records a lease and checks its fence.
func (m *machine) granted(rt *rapid.T, c *smCall, s *fairlock.Lease) {
	for _, g := range m.grants[c.lock] {
		if g.fence == s.Fence() {
			rt.Fatalf("fence %d of %s handed out twice", s.Fence(), smLocks[c.lock].name)
		}
		if !g.released.IsZero() && g.released.Before(c.started) && g.fence >= s.Fence() {
			rt.Fatalf("fence %d of %s not above %d, released before the Acquire began", s.Fence(), smLocks[c.lock].name, g.fence)
		}
	}
	m.grants[c.lock] = append(m.grants[c.lock], &smGrant{fence: s.Fence(), started: c.started})
	m.maxSeen[c.lock] = max(m.maxSeen[c.lock], s.Fence())
	m.leases = append(m.leases, &smLease{lease: s, locker: c.locker, lock: c.lock, permits: c.permits,
		group: c.group, arrival: c.arrival, gen: c.gen, requeued: c.requeued, granted: time.Now()})
}

func (m *machine) pickLease(rt *rapid.T) (int, *smLease) {
	if len(m.leases) == 0 {
		rt.Skip("no lease")
	}
	i := rapid.IntRange(0, len(m.leases)-1).Draw(rt, "lease")
	return i, m.leases[i]
}

func (m *machine) Release(rt *rapid.T) {
	i, s := m.pickLease(rt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.lease.Release(ctx)
	if err != nil && !errors.Is(err, fairlock.ErrNotHeld) && !m.lockers[s.locker].dead && m.sinceFault() > smLeaseTTL {
		rt.Fatalf("Release of a lease of a live Locker: %v", err)
	}
	m.released(i)
}

func (m *machine) released(i int) {
	s := m.leases[i]
	for _, g := range m.grants[s.lock] {
		if g.fence == s.lease.Fence() {
			g.released = time.Now()
		}
	}
	m.leases = append(m.leases[:i], m.leases[i+1:]...)
}

func (m *machine) Extend(rt *rapid.T) {
	_, s := m.pickLease(rt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.lease.Extend(ctx, smLeaseTTL)
	if err != nil && !errors.Is(err, fairlock.ErrNotHeld) && !m.lockers[s.locker].dead && m.sinceFault() > smLeaseTTL {
		rt.Fatalf("Extend of a lease of a live Locker: %v", err)
	}
}

func (m *machine) Cancel(rt *rapid.T) {
	m.mu.Lock()
	var keys [][2]int
	for k := range m.pending {
		keys = append(keys, k)
	}
	m.mu.Unlock()
	if len(keys) == 0 {
		rt.Skip("nothing waits")
	}
	sort.Slice(keys, func(a, b int) bool { return keys[a][0]*10+keys[a][1] < keys[b][0]*10+keys[b][1] })
	key := rapid.SampledFrom(keys).Draw(rt, "call")
	m.mu.Lock()
	c := m.pending[key]
	m.mu.Unlock()
	c.cancel()
	select {
	case r := <-c.done:
		c.done <- r
	case <-time.After(smWaiter + 2*smBeat + slack):
		if !m.lockers[c.locker].dead {
			rt.Fatalf("a cancelled Acquire did not return within the waiter TTL and two heartbeats")
		}
	}
}

func (m *machine) Do(rt *rapid.T) {
	i := m.alive(rt)
	lock := rapid.IntRange(0, len(smLocks)-1).Draw(rt, "lock")
	boom := rapid.Bool().Draw(rt, "panic")
	lk, l := smLocks[lock], m.lockers[i].l
	ctx, cancel := context.WithTimeout(context.Background(), smLeaseTTL)
	defer cancel()
	fn := func(context.Context) error {
		if boom {
			panic("boom")
		}
		return nil
	}
	defer func() {
		if p := recover(); p != nil && p != "boom" {
			panic(p)
		}
	}()
	switch lk.kind {
	case fairlock.LockSemaphore:
		var opts []fairlock.AcquireOption
		if lk.limit > 0 {
			opts = append(opts, fairlock.WithGroup(rapid.SampledFrom(smGroups).Draw(rt, "group")))
		}
		m.semaphore(l, lk).Do(ctx, 1, fn, opts...) //nolint:errcheck // checked by the invariants
	case fairlock.LockRWMutex:
		rw, _ := l.RWMutex(lk.name)
		rw.DoRead(ctx, fn) //nolint:errcheck // likewise
	default:
		l.Do(ctx, lk.name, fn) //nolint:errcheck // likewise
	}
}

func (m *machine) Kill(rt *rapid.T) {
	for _, l := range m.lockers {
		if l.dead {
			rt.Skip("one dead Locker is enough")
		}
	}
	i := m.alive(rt)
	m.lockers[i].dead = true
	m.lockers[i].px.Refuse(true)
	m.lockers[i].px.Cut()
	m.fault()
}

func (m *machine) LoseReply(rt *rapid.T) {
	i := m.alive(rt)
	m.lockers[i].px.DropReplyTo(rapid.SampledFrom([]string{"evalsha", "exists"}).Draw(rt, "command"))
	m.fault()
}

func (m *machine) ScriptFlush(rt *rapid.T) {
	m.rdb.ScriptFlush(context.Background())
}

func (m *machine) FlushAll(rt *rapid.T) {
	m.rdb.FlushAll(context.Background())
	m.fault()
}

// Wait lets time pass beyond the lease and waiter TTLs, then checks that
// Redis holds only what the test knows of.
func (m *machine) Wait(rt *rapid.T) {
	time.Sleep(smLeaseTTL + smBeat + slack)
	m.harvest(rt)
	m.settled(rt)
}

// harvest collects the calls that ended.
func (m *machine) harvest(rt *rapid.T) {
	var still []*smCall
	for _, c := range m.calls {
		select {
		case r := <-c.done:
			m.mu.Lock()
			if m.pending[[2]int{c.locker, c.lock}] == c {
				delete(m.pending, [2]int{c.locker, c.lock})
			}
			m.mu.Unlock()
			if r.err == nil {
				m.granted(rt, c, r.lease)
			}
		default:
			still = append(still, c)
		}
	}
	m.calls = still
	// Leases that ended (lost) stay in the list until released; a Release
	// of one is ErrNotHeld.
}

func (m *machine) Check(rt *rapid.T) {
	m.step++
	m.sinceFault()
	m.harvest(rt)
	m.checkRedis(rt)
	m.checkFIFO(rt)
}

// checkFIFO: among waiters of one generation, never requeued, on live
// Lockers, grants follow arrival; and a waiter that arrived before one
// granted a heartbeat ago is granted too, unless the head-of-line rule
// holds it (a mutex waiter behind a holder is granted; counted requests
// may wait for permits, but never behind a later one).
func (m *machine) checkFIFO(rt *rapid.T) {
	for lock := range smLocks {
		var got []*smLease
		for _, s := range m.leases {
			if s.lock == lock && s.arrival > 0 && !s.requeued && !m.lockers[s.locker].dead {
				got = append(got, s)
			}
		}
		for _, a := range got {
			for _, b := range got {
				if a.gen == b.gen && a.group == b.group && a.arrival < b.arrival && a.lease.Fence() > b.lease.Fence() {
					rt.Fatalf("%s: a waiter that arrived at step %d was granted fence %d after one that arrived at step %d (fence %d)",
						smLocks[lock].name, a.arrival, a.lease.Fence(), b.arrival, b.lease.Fence())
				}
			}
		}
		m.mu.Lock()
		for _, c := range m.pending {
			if c.lock != lock || c.arrival == 0 || c.requeued || m.lockers[c.locker].dead {
				continue
			}
			for _, b := range got {
				if b.gen == c.gen && b.group == c.group && c.arrival < b.arrival && time.Since(b.granted) > smBeat+slack && m.sinceFault() > smLeaseTTL+smBeat {
					m.mu.Unlock()
					rt.Fatalf("%s: the waiter that arrived at step %d still waits, though one that arrived at step %d was granted %v ago",
						smLocks[lock].name, c.arrival, b.arrival, time.Since(b.granted).Round(time.Millisecond))
				}
			}
		}
		m.mu.Unlock()
	}
}

// checkRedis checks every key and lock in Redis.
func (m *machine) checkRedis(rt *rapid.T) {
	ctx := context.Background()
	for _, k := range m.rdb.Keys(ctx, "*").Val() {
		if ttl := m.rdb.PTTL(ctx, k).Val(); ttl == -1 {
			rt.Fatalf("key %s has no TTL", k)
		}
	}
	for lock, lk := range smLocks {
		base := "fairlock:{" + lk.name + "}:"
		if lk.kind == fairlock.LockSemaphore {
			base += "sem:"
		} else if lk.kind == fairlock.LockRWMutex {
			base += "rw:"
		}
		var list *redis.StringSliceCmd
		var order *redis.StringSliceCmd
		var holders *redis.ZSliceCmd
		var state *redis.SliceCmd
		var fence *redis.StringCmd
		if _, err := m.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			list = p.LRange(ctx, base+"queue", 0, -1)
			order = p.ZRange(ctx, base+"order", 0, -1)
			holders = p.ZRangeWithScores(ctx, base+"holders", 0, -1)
			state = p.HMGet(ctx, base+"state", "cap", "used")
			fence = p.Get(ctx, base+"fence")
			return nil
		}); err != nil && !errors.Is(err, redis.Nil) {
			rt.Fatalf("reading %s: %v", lk.name, err)
		}
		if lk.limit > 0 {
			m.checkGroups(rt, base, lk)
		} else if strings.Join(list.Val(), " ") != strings.Join(order.Val(), " ") {
			rt.Fatalf("%s: queue %q and order %q disagree", lk.name, list.Val(), order.Val())
		}
		seen := map[string]bool{}
		for _, tok := range list.Val() {
			if seen[tok] {
				rt.Fatalf("%s: %s queued twice", lk.name, tok)
			}
			seen[tok] = true
		}
		// A counter below the seed floor (counted up from a lost key by a
		// call whose reply was lost) is seeded from the clock by the next
		// grant, above every fence before.
		if f, err := fence.Int64(); err == nil && f >= fenceFloor && f < m.maxSeen[lock] {
			rt.Fatalf("%s: fence counter %d below a fence handed out, %d", lk.name, f, m.maxSeen[lock])
		}
		if lk.kind == fairlock.LockMutex {
			continue
		}
		sum, writers := 0, 0
		for _, z := range holders.Val() {
			w := tokenWeight(z.Member.(string))
			sum += w
			if w == fairlock.MaxCapacity {
				writers++
			}
		}
		if sum > lk.cap || (writers > 0 && len(holders.Val()) > 1) {
			rt.Fatalf("%s: holders %v hold %d permits of %d", lk.name, holders.Val(), sum, lk.cap)
		}
		if used, ok := state.Val()[1].(string); ok && used != fmt.Sprint(sum) {
			rt.Fatalf("%s: state counts %s permits in use, its holders %d (%v)", lk.name, used, sum, holders.Val())
		}
	}
}

// checkGroups checks a grouped semaphore: its groups' lines together hold
// the order set's tokens, once each and each line in arrival order; each
// group's count of permits is the sum over its holders, and within the
// limit.
func (m *machine) checkGroups(rt *rapid.T, base string, lk smLock) {
	ctx := context.Background()
	// One MULTI, so that no script runs between the reads.
	var orderCmd *redis.ZSliceCmd
	var stateCmd *redis.MapStringStringCmd
	var holdersCmd *redis.ZSliceCmd
	lines := map[string]*redis.StringSliceCmd{}
	if _, err := m.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		orderCmd = p.ZRangeWithScores(ctx, base+"order", 0, -1)
		stateCmd = p.HGetAll(ctx, base+"state")
		holdersCmd = p.ZRangeWithScores(ctx, base+"holders", 0, -1)
		for _, g := range smGroups {
			line := base + "queue"
			if g != "" {
				line = base + "gq:" + g
			}
			lines[g] = p.LRange(ctx, line, 0, -1)
		}
		return nil
	}); err != nil {
		rt.Fatalf("reading %s: %v", lk.name, err)
	}
	order, state, holders := orderCmd.Val(), stateCmd.Val(), holdersCmd.Val()
	arrival := map[string]float64{}
	for _, z := range order {
		arrival[z.Member.(string)] = z.Score
	}
	lined := 0
	for _, g := range smGroups {
		last := -1.0
		for _, tok := range lines[g].Val() {
			at, ok := arrival[tok]
			if !ok || at <= last || state["g:"+tok] != g {
				rt.Fatalf("%s: line of group %q has %s out of place (order %v, its group %q)", lk.name, g, tok, order, state["g:"+tok])
			}
			last = at
			lined++
		}
	}
	if lined != len(order) {
		rt.Fatalf("%s: the groups' lines hold %d tokens, the order set %d", lk.name, lined, len(order))
	}
	held := map[string]int{}
	for _, z := range holders {
		tok := z.Member.(string)
		held[state["g:"+tok]] += tokenWeight(tok)
	}
	for g, n := range held {
		if n > lk.limit {
			rt.Fatalf("%s: group %q holds %d permits, over its limit %d (holders %v)", lk.name, g, n, lk.limit, holders)
		}
		c, ok := state["h:"+g]
		if !ok && state["grouped"] != "" && state["grouped"] != "0" && n > 0 {
			rt.Fatalf("%s: group %q holds %d permits, not counted", lk.name, g, n)
		}
		if ok && c != fmt.Sprint(n) {
			rt.Fatalf("%s: group %q counted as holding %s permits, its holders %d", lk.name, g, c, n)
		}
	}
}

// fenceFloor is scripts.FenceFloor: counters below it were never seeded.
const fenceFloor = 1_000_000_000_000

func tokenWeight(token string) int {
	if _, n, ok := strings.Cut(token, "#"); ok {
		var w int
		fmt.Sscan(n, &w)
		return w
	}
	return 1
}

// settled: after the TTLs passed, Redis's live holders are the test's
// leases and its live waiters are the test's waiting calls.
func (m *machine) settled(rt *rapid.T) {
	ctx := context.Background()
	held := map[string]bool{}
	for _, s := range m.leases {
		if s.lease.Err() == nil {
			held[s.lease.Token()] = true
		}
	}
	for _, lk := range smLocks {
		st, err := m.reader.Inspect(ctx, lk.kind, lk.name)
		if err != nil {
			rt.Fatalf("inspect %s: %v", lk.name, err)
		}
		for _, h := range st.Holders {
			if !held[h.Token] {
				rt.Fatalf("%s: Redis has a live holder %s that no caller holds (a call told it failed, or a dead Locker)", lk.name, h.Token)
			}
		}
		m.mu.Lock()
		waiting := 0
		for _, c := range m.pending {
			if smLocks[c.lock] == lk && !m.lockers[c.locker].dead {
				waiting++
			}
		}
		m.mu.Unlock()
		if len(st.Waiters) > waiting {
			rt.Fatalf("%s: %d live waiters in Redis, the test waits on %d calls there", lk.name, len(st.Waiters), waiting)
		}
	}
}

// finish ends every call and lease and closes the Lockers: then only fence
// keys are left.
func (m *machine) finish(rt *rapid.T) {
	for _, c := range m.calls {
		c.cancel()
	}
	for _, c := range m.calls {
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			rt.Fatalf("a cancelled call never returned")
		}
	}
	for _, s := range m.leases {
		s.lease.Release(context.Background()) //nolint:errcheck // may be lost
	}
	for _, l := range m.lockers {
		l.l.Close()
	}
	// A dead Locker's records stay until they expire (keepTTL), ignored by
	// everyone: its session is gone. Nothing live is left.
	deadline := time.Now().Add(smLeaseTTL + smBeat + slack)
	for {
		var live []string
		for _, lk := range smLocks {
			st, err := m.reader.Inspect(context.Background(), lk.kind, lk.name)
			if err != nil {
				rt.Fatalf("inspect %s: %v", lk.name, err)
			}
			if st.Held() || len(st.Waiters) > 0 {
				live = append(live, fmt.Sprintf("%s: %+v", lk.name, st))
			}
		}
		if len(live) == 0 {
			break
		}
		if time.Now().After(deadline) {
			rt.Fatalf("after every Locker closed, still live: %q", live)
		}
		time.Sleep(20 * time.Millisecond)
	}
	m.checkRedis(rt)
}

// setDefault sets a rapid flag unless the command line did.
func setDefault(name, value string) {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	if !set {
		flag.Set(name, value) //nolint:errcheck // the flag exists
	}
}

func TestStateMachine(t *testing.T) {
	if testing.Short() {
		t.Skip("runs random sequences on a real redis-server")
	}
	// A budget that fits CI: -rapid.checks and -rapid.steps raise it.
	setDefault("rapid.checks", "12")
	setDefault("rapid.steps", "25")
	srv := redistest.Start(t)
	m := &machine{t: t, srv: srv, rdb: srv.Client(t)}
	m.reader = newLocker(t, m.rdb)
	steps := 0
	rapid.Check(t, func(rt *rapid.T) {
		m.init(rt)
		rt.Repeat(rapid.StateMachineActions(m))
		steps += m.step
		m.finish(rt)
	})
	t.Logf("%d steps checked", steps)
}
