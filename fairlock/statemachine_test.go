package fairlock_test

// TestStateMachine drives the engine through random sequences of
// operations and faults (pgregory.net/rapid), on a real redis-server, with
// three Lockers, each behind its own proxy and each with lease and waiter
// TTLs of its own (75 ms to 600 ms, lease TTL != waiter TTL as often as
// not), on a mutex, a semaphore of 3 permits, a read-write lock, and a
// semaphore of 3 permits shared by groups (WithGroup, the groups "", "a"
// and "b", WithGroupLimit 2; a grouped request may weigh its group 1, 3
// or 1000 with WithGroupWeight, or name no weight). A request of the
// mutex or a semaphore draws a priority (0, 4 or 9), and each Locker an
// aging of its own (50 ms, 400 ms or the default), so waiters pass each
// other across lanes and age while the faults run. rapid shrinks a
// failure to a short sequence and prints it.
//
// Actions: Acquire (waits until queued or granted), TryAcquire, Release,
// Extend, Cancel of a waiting call, Do whose fn returns or panics, and
// AcquireBoth, a MultiMutex of the two mutexes "m" and "n". Faults,
// each a generation of its own for the FIFO check:
//   - a Locker that dies (its network is cut for good);
//   - time passing beyond every TTL (Wait);
//   - SCRIPT FLUSH, FLUSHALL;
//   - a reply lost after Redis ran the command (with go-redis's retries on
//     or off, per Locker);
//   - one request held in the network while the Locker's other
//     connections flow, or the reply to one, let go later by ReleaseHeld:
//     after its caller gave up (each client times out a read after 250
//     ms), after its cancel, after renewals, after go-redis's retry of it;
//   - a command sent to Redis a second time, later, as go-redis's retry
//     does (the scripts go-redis may retry);
//   - one connection cut;
//   - full memory switched on and off (noeviction, maxmemory 1);
//   - rollback: Redis is a primary and a replica behind a front proxy that
//     every Locker's own proxy dials; replication may be stalled (writes
//     from then on are on the primary only), the replica promoted in a
//     failover (the primary killed, the front proxy sent to the replica),
//     or the primary restarted from an older snapshot (SAVE, then later
//     SIGKILL and a restart that loads it).
//
// After every step, reading Redis with a raw client:
//   - every key has an expiry;
//   - each queue's lines (one per priority) together hold the order set's
//     tokens, without repeats, each in the line of its priority and each
//     line in arrival order, and the order set scores the waiters of
//     priorities above 0 below the others (with groups: one line per group
//     and priority), but for dead waiters whose line expired first
//     (checkUnlinedDead); a semaphore's
//     count of permits in use equals the sum over its holders, and so does
//     each group's; the groups' clock fields are kept only for a group
//     with a party, a grant record only for a holder, and each priority's
//     groups set lists each group at the member and clock its state says;
//   - permits held never exceed the capacity, and a writer holds alone; no
//     group holds more than its limit;
//   - no fence is handed out twice, a fence counter is at least every
//     fence seen (but after a rollback, until the lock's next grant), and
//     a grant's fence exceeds those of the grants returned before its
//     Acquire began, across rollbacks too;
//   - a lease whose Release succeeded is never a live holder again, but
//     within T_lease + 2 heartbeats of a rollback (the bound the README
//     states; its Locker gives up a session whose writes Redis lost);
//   - live waiters are granted in arrival order, with the head-of-line
//     rule: a later waiter of the same generation (no fault in between, a
//     live Locker, never requeued), of the same group and of the same
//     priority is never granted before an earlier one.
//
// And as users see it, with the test's one clock: the leases that are
// valid (from Acquire's return until its holder calls Release, or the
// Locker reports EventLost, which it does as Done closes; for Do, while fn
// runs) never hold more than a lock's capacity at once, or more than one
// for a mutex or a writer. The margin allowed is none: a lease's start is
// stamped after Acquire returned, its end as it ended.
//
// And after time passed beyond the TTLs (the stated bound: the longest
// lease TTL + the longest heartbeat + slack): every live holder in Redis is
// a lease the test holds, every live waiter a call the test still waits
// on, so a caller told that its call failed holds nothing; a dead Locker
// holds nothing.
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
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/redistest"
	"github.com/fairlock/fairlock/scripts"
	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"
)

// The TTLs a Locker of the machine draws, for its leases and its waiters
// apart: down to the shortest valid (a heartbeat of MinHeartbeat).
var smTTLs = []time.Duration{3 * fairlock.MinHeartbeat, 200 * time.Millisecond, 600 * time.Millisecond}

// The agings a Locker of the machine draws: short enough that waiters age
// past others within a sequence, and the default.
var smAgings = []time.Duration{50 * time.Millisecond, 400 * time.Millisecond, fairlock.DefaultPriorityAging}

// smPriorities are the priorities a request of the mutex or a semaphore
// draws.
var smPriorities = []int{0, 0, 4, 9}

// smReadTimeout is how long a Locker's client waits for a reply: a request
// or reply held in the network fails its call after it.
const smReadTimeout = 250 * time.Millisecond

type smLock struct {
	name  string
	kind  fairlock.LockKind
	cap   int
	limit int // WithGroupLimit; > 0: its calls draw a group
}

var smLocks = []smLock{{"m", fairlock.LockMutex, 1, 0}, {"s", fairlock.LockSemaphore, 3, 0},
	{"r", fairlock.LockRWMutex, fairlock.MaxCapacity, 0}, {"g", fairlock.LockSemaphore, 3, 2},
	{"n", fairlock.LockMutex, 1, 0}}

// smPair are the two mutexes AcquireBoth takes with a MultiMutex, named in
// the order opposite to the one it takes them in.
var smPair = [2]int{4, 0}

// smGroups are the groups of the grouped semaphore: "" names none.
var smGroups = []string{"", "a", "b"}

type smLocker struct {
	l             *fairlock.Locker
	px            *redistest.Proxy
	lease, waiter time.Duration
	dead          bool
	retry         bool // go-redis retries a lost reply
	// observed: the Locker has an observer. One without is what most
	// users run: the test learns of its lost leases from Done, of its
	// lost places from OnQueued called again.
	observed bool
}

// An smCall is one Acquire or Do under way.
type smCall struct {
	locker, lock int
	permits      int // the weight Redis counts: a writer all of MaxCapacity
	group        string
	priority     int
	arrival      int // when it was queued, in steps; 0 if not (yet)
	gen          int // the generation it queued in
	requeued     bool
	multi        string // an AcquireBoth's: the metadata of its leases
	started      time.Time
	cancel       context.CancelFunc
	queued       chan struct{}
	done         chan result
	returned     time.Time // when Acquire returned; written before done
}

type smLease struct {
	lease        *fairlock.Lease
	locker, lock int
	permits      int
	group        string
	priority     int
	arrival, gen int // its call's
	requeued     bool
	granted      time.Time
	// when its Acquire began and returned
	started, returned time.Time
}

// String says whose lease s is and when its Acquire ran, for failure
// messages.
func (s *smLease) String() string {
	return fmt.Sprintf("locker %d's %s, asked %s, returned %s", s.locker, s.lease.Token(),
		s.started.Format("15:04:05.000000"), s.returned.Format("15:04:05.000000"))
}

type smGrant struct {
	fence    int64
	started  time.Time // when its Acquire began
	returned time.Time // when its Acquire returned
	released time.Time // zero while held
}

type machine struct {
	t       *testing.T
	pair    *redistest.Pair // the Lockers' proxies dial its front proxy
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
	// lagging marks the locks whose fence counter a rollback may have set
	// back, until their next grant; releasedOK the leases whose Release
	// succeeded, by token; rolledAt when the last rollback took effect.
	lagging    map[int]bool
	releasedOK map[string]bool
	rolledAt   time.Time // the last rollback that lost writes
	rollbackAt time.Time // the last rollback, whether or not it lost any
	rollbacks  []smSpan  // every rollback and FLUSHALL, from its first step to its end, for checkFIFO
	stalled    bool      // replication is stalled
	// The longest lease TTL, waiter TTL and heartbeat of the Lockers: the
	// bounds that hold whichever Locker a party belongs to.
	maxLease, maxWaiter, maxBeat time.Duration
	held                         []smHeld // requests and replies held, copies not sent yet
	full                         bool     // Redis at full memory
	valid                        *validity
	hits                         map[string]int // faults that took effect, by class, over the whole run
	multis                       int            // AcquireBoth calls, for their metadata
	// batched counts the Lockers' calls that shared a round trip with
	// another (batch.go), over the whole run.
	batched atomic.Int64

	mu      sync.Mutex
	pending map[[2]int]*smCall // by locker and lock: at most one each
}

// An smHeld is a fault under way: a request or reply held, or a copy of a
// request not sent yet, and its class for the count of faults.
type smHeld struct {
	hold  *redistest.Hold
	class string
}

// smCalls are the SHA1s of the scripts a Locker's calls run in batches
// (batch.go): its heartbeat's pipeline runs others.
var smCalls = func() map[string]bool {
	calls := map[string]bool{}
	for name, src := range scripts.All() {
		switch name[strings.Index(name, "/")+1:] {
		case "acquire", "acquire_fast", "recover", "release", "release_fast", "cancel":
			sum := sha1.Sum([]byte(src))
			calls[hex.EncodeToString(sum[:])] = true
		}
	}
	return calls
}()

// A batchCounter counts the calls of a Locker's batches of two or more.
type batchCounter struct{ n *atomic.Int64 }

func (batchCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (batchCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (bc batchCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var n int64
		for _, cmd := range cmds {
			if args := cmd.Args(); len(args) > 1 && smCalls[fmt.Sprint(args[1])] {
				n++
			}
		}
		if n > 1 {
			bc.n.Add(n)
		}
		return next(ctx, cmds)
	}
}

// smMarkers are the requests of the Lockers that a fault can catch, by
// the bytes they carry: the SHA1 of each script they run (EVALSHA, the
// renewal's renew.lua among them). smRetried
// are those go-redis may send again: the scripts that bring no token.
var smMarkers, smRetried = func() (all, retried []string) {
	for name, src := range scripts.All() {
		sum := sha1.Sum([]byte(src))
		sha := hex.EncodeToString(sum[:])
		switch name[strings.Index(name, "/")+1:] {
		case "recover", "cancel", "extend", "heartbeat", "renew":
			retried = append(retried, sha)
			all = append(all, sha)
		case "acquire", "acquire_fast", "release", "release_fast":
			all = append(all, sha)
		}
	}
	slices.Sort(all)
	slices.Sort(retried)
	return all, retried
}()

func (m *machine) init(rt *rapid.T) {
	if m.stalled {
		m.t.Logf("%s resume on %s", time.Now().Format("15:04:05.000"), m.pair.Primary.Addr)
		m.pair.Resume(m.t)
		m.stalled = false
	}
	m.rdb.FlushAll(context.Background())
	// The snapshot a RestoreSnapshot of this case goes back to, at the
	// latest: empty, not a former case's data.
	m.pair.Primary.Save(m.t)
	m.pair.WaitSynced(m.t)
	m.lockers = nil
	m.calls, m.leases, m.held = nil, nil, nil
	m.grants, m.maxSeen = map[int][]*smGrant{}, map[int]int64{}
	m.lagging, m.releasedOK, m.rolledAt, m.rollbackAt = map[int]bool{}, map[string]bool{}, time.Time{}, time.Time{}
	m.rollbacks = nil
	m.mu.Lock()
	m.pending = map[[2]int]*smCall{}
	m.mu.Unlock()
	m.step, m.gen, m.full = 0, 0, false
	m.maxLease, m.maxWaiter, m.maxBeat = 0, 0, 0
	m.valid = newValidity()
	for range 3 {
		m.addLocker(rt)
	}
}

// addLocker starts a Locker with TTLs of its own, behind a proxy of its
// own.
func (m *machine) addLocker(rt *rapid.T) {
	i := len(m.lockers)
	px := redistest.StartProxy(m.t, m.pair.Proxy.Addr)
	retry := rapid.Bool().Draw(rt, fmt.Sprintf("retry%d", i))
	lease := rapid.SampledFrom(smTTLs).Draw(rt, fmt.Sprintf("lease%d", i))
	waiter := rapid.SampledFrom(smTTLs).Draw(rt, fmt.Sprintf("waiter%d", i))
	aging := rapid.SampledFrom(smAgings).Draw(rt, fmt.Sprintf("aging%d", i))
	observed := rapid.Bool().Draw(rt, fmt.Sprintf("observed%d", i))
	opt := &redis.Options{Addr: px.Addr, MaxRetries: -1, ReadTimeout: smReadTimeout, WriteTimeout: smReadTimeout}
	if retry {
		opt.MaxRetries = 3
	}
	c := redis.NewClient(opt)
	c.AddHook(batchCounter{&m.batched})
	opts := []fairlock.Option{fairlock.WithLeaseTTL(lease), fairlock.WithWaiterTTL(waiter), fairlock.WithPriorityAging(aging)}
	if observed {
		// This test case's books: a Locker whose Close gave up on a
		// faulty network may still report after the next case began.
		valid, pending := m.valid, m.pending
		opts = append(opts, fairlock.WithObserver(func(e fairlock.Event) { m.observed(valid, pending, i, e) }))
	} else {
		m.hit("locker-without-observer")
	}
	l, err := fairlock.New(c, opts...)
	if err != nil {
		rt.Fatal(err)
	}
	m.lockers = append(m.lockers, &smLocker{l: l, px: px, lease: lease, waiter: waiter, retry: retry, observed: observed})
	m.maxLease, m.maxWaiter = max(m.maxLease, lease), max(m.maxWaiter, waiter)
	m.maxBeat = max(m.maxBeat, l.Heartbeat())
	if lease != waiter {
		m.hit("locker-with-unequal-ttls")
	}
	if aging < fairlock.DefaultPriorityAging {
		m.hit("locker-with-short-aging")
	}
	rt.Logf("locker %d: lease TTL %v, waiter TTL %v, aging %v, retries %v", i, lease, waiter, aging, retry)
	rt.Cleanup(func() {
		l.Close()
		c.Close()
		px.Close()
	})
}

// observed notes a lease's end (EventLost, as its Done closes), and a
// waiter that lost its place and queued again: it no longer stands where
// it arrived.
func (m *machine) observed(valid *validity, pending map[[2]int]*smCall, locker int, e fairlock.Event) {
	valid.log(e.Token, fmt.Sprintf("%s %v q=%v err=%v", time.Now().Format("15:04:05.000000"), e.Kind, e.Queued, e.Err))
	if id, _, ok := strings.Cut(e.Token, "."); ok {
		valid.log("locker:"+id, fmt.Sprint(locker))
	}
	if e.Kind == fairlock.EventLost {
		valid.ended(e.Token, fmt.Sprintf("lost at locker %d", locker), time.Now())
	}
	if e.Kind != fairlock.EventCancelled || !errors.Is(e.Err, fairlock.ErrPlaceLost) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, c := range pending {
		if key[0] == locker && smLocks[key[1]].name == e.Name && smLocks[key[1]].kind == e.Lock {
			c.requeued = true
		}
	}
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
			m.hit("lost-reply")
		}
	}
	if len(m.held) > 0 || m.full {
		return 0 // a fault still under way
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

// busy draws a live Locker with a lease or a call under way: its
// heartbeat talks to Redis, so that a fault armed on its network soon
// catches a request.
func (m *machine) busy(rt *rapid.T) int {
	in := map[int]bool{}
	for _, s := range m.leases {
		in[s.locker] = true
	}
	m.mu.Lock()
	for key := range m.pending {
		in[key[0]] = true
	}
	m.mu.Unlock()
	var busy []int
	for i, l := range m.lockers {
		if in[i] && !l.dead {
			busy = append(busy, i)
		}
	}
	if len(busy) == 0 {
		rt.Skip("no Locker talks to Redis")
	}
	return rapid.SampledFrom(busy).Draw(rt, "locker")
}

// acquirer is the call a request makes on a Locker.
func (m *machine) acquirer(i, lock int, r smRequest, try bool) func(context.Context, ...fairlock.AcquireOption) (*fairlock.Lease, error) {
	l, lk := m.lockers[i].l, smLocks[lock]
	switch lk.kind {
	case fairlock.LockSemaphore:
		s := m.semaphore(l, lk)
		take := s.Acquire
		if try {
			take = s.TryAcquire
		}
		return func(ctx context.Context, o ...fairlock.AcquireOption) (*fairlock.Lease, error) {
			if r.group != "" {
				o = append(o, fairlock.WithGroup(r.group))
			}
			if r.weight > 0 {
				o = append(o, fairlock.WithGroupWeight(r.weight))
			}
			return take(ctx, r.permits, append(o, fairlock.WithPriority(r.priority))...)
		}
	case fairlock.LockRWMutex:
		rw, _ := l.RWMutex(lk.name)
		switch {
		case r.write && try:
			return rw.TryLock
		case r.write:
			return rw.Lock
		case try:
			return rw.TryRLock
		}
		return rw.RLock
	}
	mu, _ := l.Mutex(lk.name)
	take := mu.Acquire
	if try {
		take = mu.TryAcquire
	}
	return func(ctx context.Context, o ...fairlock.AcquireOption) (*fairlock.Lease, error) {
		return take(ctx, append(o, fairlock.WithPriority(r.priority))...)
	}
}

func (m *machine) semaphore(l *fairlock.Locker, lk smLock) *fairlock.Semaphore {
	var opts []fairlock.SemaphoreOption
	if lk.limit > 0 {
		opts = append(opts, fairlock.WithGroupLimit(lk.limit))
	}
	s, _ := l.Semaphore(lk.name, lk.cap, opts...)
	return s
}

// An smRequest is what a call asks for.
type smRequest struct {
	permits  int // the weight Redis counts: a writer all of MaxCapacity
	group    string
	weight   int // WithGroupWeight; 0: none
	priority int
	write    bool
}

// request draws what a call asks for. A request of the grouped semaphore
// asks for no more than its group may hold, and may weigh its group (0:
// no WithGroupWeight), which changes the group's weight. A request of the
// mutex or a semaphore draws a priority.
func (m *machine) request(rt *rapid.T, lock int) smRequest {
	r := smRequest{permits: 1}
	switch lk := smLocks[lock]; lk.kind {
	case fairlock.LockSemaphore:
		most := lk.cap
		if lk.limit > 0 {
			r.group = rapid.SampledFrom(smGroups).Draw(rt, "group")
			if r.group != "" {
				r.weight = rapid.SampledFrom([]int{0, 1, 3, fairlock.MaxGroupWeight}).Draw(rt, "weight")
			}
			most = lk.limit
		}
		r.permits = rapid.IntRange(1, most).Draw(rt, "permits")
	case fairlock.LockRWMutex:
		if r.write = rapid.Bool().Draw(rt, "write"); r.write {
			r.permits = fairlock.MaxCapacity
		}
		return r
	}
	if r.priority = rapid.SampledFrom(smPriorities).Draw(rt, "priority"); r.priority > 0 {
		m.hit("request-with-priority")
	}
	return r
}

func (m *machine) Acquire(rt *rapid.T) {
	i := m.alive(rt)
	lock := rapid.IntRange(0, len(smLocks)-1).Draw(rt, "lock")
	if m.waitsFor(i, lock) {
		rt.Skip("one waiting call per Locker and lock")
	}
	m.awaitQueued(m.startAcquire(rt, i, lock))
}

// AcquireMany starts an Acquire on every lock one Locker does not wait
// for, at once: the calls share round trips (batch.go).
func (m *machine) AcquireMany(rt *rapid.T) {
	i := m.alive(rt)
	var started []*smCall
	for lock := range smLocks {
		if !m.waitsFor(i, lock) {
			started = append(started, m.startAcquire(rt, i, lock))
		}
	}
	if len(started) < 2 {
		rt.Skip("a Locker that waits for all but one lock")
	}
	for _, c := range started {
		m.awaitQueued(c)
	}
}

// AcquireBoth starts a MultiMutex's Acquire of the two mutexes by Locker
// i: a call on each, which end together, with a lease each or the same
// error. Each counts in its lock's checks as any lease does; the FIFO
// check leaves them out: the request joins both queues in one MULTI/EXEC,
// but OnQueued, the test's one view of that, does not say which queue it
// reports. While it waits for one mutex, it may hold the other: its
// metadata tells the test's checks whose holder that is.
func (m *machine) AcquireBoth(rt *rapid.T) {
	i := m.alive(rt)
	if m.waitsFor(i, smPair[0]) || m.waitsFor(i, smPair[1]) {
		rt.Skip("one waiting call per Locker and lock")
	}
	both, err := m.lockers[i].l.MultiMutex(smLocks[smPair[0]].name, smLocks[smPair[1]].name)
	if err != nil {
		rt.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	m.multis++
	multi := fmt.Sprint("multi ", m.multis)
	var calls [2]*smCall
	for k, lock := range smPair {
		calls[k] = &smCall{locker: i, lock: lock, permits: 1, gen: m.gen, requeued: true, multi: multi, started: time.Now(), cancel: cancel,
			queued: make(chan struct{}), done: make(chan result, 1)}
	}
	go func() {
		defer cancel() // the leases outlive the call's ctx
		ml, err := both.Acquire(ctx, fairlock.WithMetadata(multi))
		for _, c := range calls {
			c.returned = time.Now()
			if err != nil {
				c.done <- result{nil, err}
				continue
			}
			for _, ls := range ml.Leases() {
				if ls.Name() == smLocks[c.lock].name {
					c.done <- result{ls, nil}
				}
			}
		}
	}()
	m.mu.Lock()
	for _, c := range calls {
		m.pending[[2]int{i, c.lock}] = c
	}
	m.mu.Unlock()
	m.calls = append(m.calls, calls[:]...)
	m.hit("multi-mutex")
	select {
	case r := <-calls[0].done:
		calls[0].done <- r // harvested by Check
	case <-time.After(m.maxBeat):
	}
}

// waitsFor tells whether Locker i has a call waiting for lock.
func (m *machine) waitsFor(i, lock int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pending[[2]int{i, lock}] != nil
}

// startAcquire starts an Acquire of lock by Locker i in a goroutine.
func (m *machine) startAcquire(rt *rapid.T, i, lock int) *smCall {
	r := m.request(rt, lock)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	c := &smCall{locker: i, lock: lock, permits: r.permits, group: r.group, priority: r.priority, gen: m.gen, started: time.Now(), cancel: cancel,
		queued: make(chan struct{}), done: make(chan result, 1)}
	acquire := m.acquirer(i, lock, r, false)
	// A waiter that follows its place goes through the heartbeat's script
	// every heartbeat; the others are asked about with ZMSCORE.
	var opts []fairlock.AcquireOption
	if rapid.Bool().Draw(rt, "position") {
		opts = append(opts, fairlock.OnPosition(func(int) {}))
		m.hit("waiter-with-position")
	}
	queuedOnce := false
	go func() {
		s, err := acquire(ctx, append(opts, fairlock.OnQueued(func(int) {
			// Again: the waiter lost its place and queued anew.
			m.mu.Lock()
			defer m.mu.Unlock()
			if queuedOnce {
				c.requeued = true
				return
			}
			queuedOnce = true
			close(c.queued)
		}))...)
		c.returned = time.Now()
		c.done <- result{s, err}
	}()
	m.mu.Lock()
	m.pending[[2]int{i, lock}] = c
	m.mu.Unlock()
	m.calls = append(m.calls, c)
	return c
}

// awaitQueued returns when c is queued or has ended, or when a fault
// seems to hold it up.
func (m *machine) awaitQueued(c *smCall) {
	select {
	case <-c.queued:
		c.arrival = m.step
	case r := <-c.done:
		c.done <- r // harvested by Check
	case <-time.After(m.maxLease + m.maxBeat):
		// Neither queued nor granted: a fault holds it up. It is checked
		// as it ends.
	}
}

func (m *machine) TryAcquire(rt *rapid.T) {
	i := m.alive(rt)
	lock := rapid.IntRange(0, len(smLocks)-1).Draw(rt, "lock")
	r := m.request(rt, lock)
	started := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := m.acquirer(i, lock, r, true)(ctx)
	if err == nil {
		m.granted(rt, &smCall{locker: i, lock: lock, permits: r.permits, group: r.group, priority: r.priority, gen: m.gen, started: started, returned: time.Now()}, s)
	}
}

// granted records a lease and checks its fence.
func (m *machine) granted(rt *rapid.T, c *smCall, s *fairlock.Lease) {
	for _, g := range m.grants[c.lock] {
		if g.fence == s.Fence() {
			rt.Fatalf("fence %d of %s handed out twice", s.Fence(), smLocks[c.lock].name)
		}
		if g.returned.Before(c.started) && g.fence >= s.Fence() {
			rt.Fatalf("fence %d of %s not above %d, handed out before the Acquire began", s.Fence(), smLocks[c.lock].name, g.fence)
		}
	}
	if s.Fence() > m.maxSeen[c.lock] && c.started.After(m.rollbackAt) {
		// Drawn after the last rollback: the counter has caught up.
		delete(m.lagging, c.lock)
	}
	m.grants[c.lock] = append(m.grants[c.lock], &smGrant{fence: s.Fence(), started: c.started, returned: c.returned})
	m.valid.began(fmt.Sprintf("locker %d's %s", c.locker, s.Token()), s.Token(), c.lock, c.permits, c.started, c.returned)
	if !m.lockers[c.locker].observed {
		valid := m.valid // this test case's: the lease may end after it
		go func() {
			<-s.Done()
			if errors.Is(s.Err(), fairlock.ErrLost) {
				valid.ended(s.Token(), fmt.Sprintf("lost at locker %d (Done)", c.locker), fairlock.EndedAt(s))
			}
		}()
	}
	m.maxSeen[c.lock] = max(m.maxSeen[c.lock], s.Fence())
	m.leases = append(m.leases, &smLease{lease: s, locker: c.locker, lock: c.lock, permits: c.permits,
		group: c.group, priority: c.priority, arrival: c.arrival, gen: c.gen, requeued: c.requeued, granted: time.Now(),
		started: c.started, returned: c.returned})
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
	m.valid.ended(s.lease.Token(), "released", time.Now()) // its holder no longer acts under it
	err := s.lease.Release(ctx)
	if err == nil {
		m.releasedOK[s.lease.Token()] = true
	}
	if err != nil && !errors.Is(err, fairlock.ErrNotHeld) && !m.lockers[s.locker].dead && m.sinceFault() > m.maxLease {
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
	err := s.lease.Extend(ctx, m.lockers[s.locker].lease)
	if err != nil && !errors.Is(err, fairlock.ErrNotHeld) && !m.lockers[s.locker].dead && m.sinceFault() > m.maxLease {
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
	case <-time.After(m.maxWaiter + 2*m.maxBeat + 2*smReadTimeout + slack):
		if !m.lockers[c.locker].dead {
			rt.Fatalf("a cancelled Acquire did not return within the waiter TTL, two heartbeats and two reads")
		}
	}
}

func (m *machine) Do(rt *rapid.T) {
	i := m.alive(rt)
	lock := rapid.IntRange(0, len(smLocks)-1).Draw(rt, "lock")
	boom := rapid.Bool().Draw(rt, "panic")
	lk, l := smLocks[lock], m.lockers[i].l
	ctx, cancel := context.WithTimeout(context.Background(), m.maxLease)
	defer cancel()
	asked := time.Now()
	fn := func(ctx context.Context) error {
		// Held while fn runs, as a careful user sees it: not if its
		// context already says the lease is lost.
		if ctx.Err() == nil {
			start := time.Now()
			defer func() { m.valid.span(lock, 1, asked, start, time.Now()) }()
		}
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

// Kill cuts a Locker's network for good, as a process that dies, and
// starts another in its place, as the process restarted; its parties stay
// in Redis, dead.
func (m *machine) Kill(rt *rapid.T) {
	if len(m.lockers) >= 9 {
		rt.Skip("enough Lockers died")
	}
	i := m.alive(rt)
	m.lockers[i].dead = true
	m.lockers[i].px.Refuse(true)
	m.lockers[i].px.Cut()
	m.addLocker(rt)
	m.hit("kill")
	m.fault()
}

func (m *machine) LoseReply(rt *rapid.T) {
	i := m.busy(rt)
	m.lockers[i].px.DropReplyTo(rapid.SampledFrom([]string{"evalsha", "exists"}).Draw(rt, "command"))
	m.fault()
}

// HoldRequest holds a Locker's next request of a kind drawn (a script, the
// fast path, a renewal), and what follows it on its connection, until
// ReleaseHeld or Wait lets it go.
func (m *machine) HoldRequest(rt *rapid.T) {
	px := m.lockers[m.busy(rt)].px
	m.held = append(m.held, smHeld{px.HoldRequest(m.marker(rt)), "held-request"})
	m.fault()
}

// HoldReply lets such a request run, and holds its reply.
func (m *machine) HoldReply(rt *rapid.T) {
	px := m.lockers[m.busy(rt)].px
	m.held = append(m.held, smHeld{px.HoldReply(m.marker(rt)), "held-reply"})
	m.fault()
}

// marker draws what a hold catches: a Locker's next request, whatever it
// is, or its next of one kind.
func (m *machine) marker(rt *rapid.T) string {
	if rapid.Bool().Draw(rt, "any request") {
		return "" // every request contains it
	}
	return rapid.SampledFrom(smMarkers).Draw(rt, "request")
}

// Duplicate sends Redis a copy of a Locker's next call of a script that
// go-redis may retry, when ReleaseHeld or Wait lets it go.
func (m *machine) Duplicate(rt *rapid.T) {
	px := m.lockers[m.busy(rt)].px
	m.held = append(m.held, smHeld{px.Duplicate(smRetried...), "duplicated"})
	m.fault()
}

// ReleaseHeld lets one held request, reply or copy go on, among those
// that caught one.
func (m *machine) ReleaseHeld(rt *rapid.T) {
	var caught []int
	for i, h := range m.held {
		select {
		case <-h.hold.Caught():
			caught = append(caught, i)
		default:
		}
	}
	if len(caught) == 0 {
		rt.Skip("nothing held")
	}
	i := rapid.SampledFrom(caught).Draw(rt, "held")
	m.let(m.held[i])
	m.held = slices.Delete(m.held, i, i+1)
}

// let releases h, counting it if it caught something.
func (m *machine) let(h smHeld) {
	select {
	case <-h.hold.Caught():
		m.hit(h.class)
	default:
	}
	h.hold.Release()
	m.fault()
}

func (m *machine) CutConnection(rt *rapid.T) {
	if m.lockers[m.alive(rt)].px.CutOne() {
		m.hit("cut-connection")
		m.fault()
	}
}

// FullMemory switches full memory on (noeviction, maxmemory below what is
// used) or off.
func (m *machine) FullMemory(rt *rapid.T) {
	m.full = !m.full
	m.valid.log("", fmt.Sprintf("%s full=%v", time.Now().Format("15:04:05.000000"), m.full))
	setFullMemory(m.t, m.rdb, m.full)
	if m.full {
		m.hit("full-memory")
	}
	m.fault()
}

func (m *machine) ScriptFlush(rt *rapid.T) {
	m.rdb.ScriptFlush(context.Background())
	m.hit("script-flush")
}

// FlushAll loses Redis's data. Mutual exclusion is promised on a Redis
// that keeps its data: the leases granted before are left out of the
// validity check from here on (their holders hear of the loss at their
// next renewal).
func (m *machine) FlushAll(rt *rapid.T) {
	began := time.Now()
	m.rdb.FlushAll(context.Background())
	m.valid.cut(time.Now())
	m.rollbacks = append(m.rollbacks, smSpan{began, time.Now()})
	m.hit("flushall")
	m.fault()
}

// Stall stops replication: the writes from now on are on the primary
// only, until a failover loses them.
func (m *machine) Stall(rt *rapid.T) {
	if m.stalled {
		rt.Skip("replication stalled already")
	}
	m.pair.Stall(m.t)
	m.stalled = true
	m.t.Logf("%s stall on %s", time.Now().Format("15:04:05.000"), m.pair.Primary.Addr)
}

// Failover promotes the replica: Redis goes back to the moment
// replication stalled.
func (m *machine) Failover(rt *rapid.T) {
	if !m.stalled {
		rt.Skip("replication is not stalled: nothing to lose")
	}
	ctx := context.Background()
	began := time.Now()
	lag, err := redistest.ReplicationLag(ctx, m.pair.Primary, m.pair.Replica)
	m.valid.log("", fmt.Sprintf("%s failover, lag %d (%v)", time.Now().Format("15:04:05.000000"), lag, err))
	m.pair.Failover(m.t)
	m.t.Logf("%s failover to %s, lag %d", time.Now().Format("15:04:05.000"), m.pair.Primary.Addr, lag)
	m.stalled = false
	m.rolledBack(began, lag > 0 || err != nil, "rollback-failover")
	m.pair.WaitSynced(m.t)
}

// Snapshot saves the primary's data, for RestoreSnapshot.
func (m *machine) Snapshot(rt *rapid.T) { m.pair.Primary.Save(m.t) }

// RestoreSnapshot kills the primary and restarts it from its last
// snapshot (the one it took, or a replica's last sync if it was one): the
// writes since are lost.
func (m *machine) RestoreSnapshot(rt *rapid.T) {
	began := time.Now()
	changes := int64(1)
	for _, line := range strings.Split(m.rdb.Info(context.Background(), "persistence").Val(), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "rdb_changes_since_last_save:"); ok {
			fmt.Sscan(v, &changes)
		}
	}
	m.valid.log("", fmt.Sprintf("%s restart from snapshot, %d changes since", time.Now().Format("15:04:05.000000"), changes))
	m.pair.Primary.RestartFromSnapshot(m.t)
	m.t.Logf("%s restored %s, %d changes lost", time.Now().Format("15:04:05.000"), m.pair.Primary.Addr, changes)
	m.stalled = false
	m.rolledBack(began, changes > 0, "rollback-snapshot")
	m.pair.WaitSynced(m.t)
}

// rolledBack records a rollback: the leases valid before it are out of
// the validity check, as after a FLUSHALL, the fence counters may lag,
// and the server's settings are put back.
func (m *machine) rolledBack(began time.Time, tookEffect bool, class string) {
	now := time.Now()
	m.valid.cut(now)
	m.rollbackAt = now
	m.rollbacks = append(m.rollbacks, smSpan{began, now})
	for lock := range smLocks {
		m.lagging[lock] = true
	}
	if tookEffect {
		m.hit(class)
		m.rolledAt = now
	}
	if m.full {
		setFullMemory(m.t, m.rdb, true)
	}
	m.fault()
}

// Wait lets whatever is held go, Redis accept writes again, then time
// pass beyond every TTL, and checks that Redis holds only what the test
// knows of. At full memory the parties in stay in (README): a lease a
// Locker lost while Redis refuses its withdrawal keeps its permits as long
// as the Locker's session lives, which is meant; the check is of what
// remains once the Lockers can clean up.
func (m *machine) Wait(rt *rapid.T) {
	if m.full {
		m.full = false
		m.valid.log("", fmt.Sprintf("%s full=false", time.Now().Format("15:04:05.000000")))
		setFullMemory(m.t, m.rdb, false)
		m.fault()
	}
	for _, h := range m.held {
		m.let(h)
	}
	m.held = nil
	time.Sleep(m.maxLease + m.maxBeat + slack)
	m.harvest(rt)
	m.settled(rt)
}

// hit counts a fault that took effect.
func (m *machine) hit(class string) {
	m.hits[class]++
	m.valid.log("", time.Now().Format("15:04:05.000000")+" FAULT "+class)
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
	m.checkReleased(rt)
	m.valid.check(rt)
}

// checkReleased: a lease whose Release succeeded holds nothing in Redis,
// but within the bound after a rollback that brought its grant back.
func (m *machine) checkReleased(rt *rapid.T) {
	if len(m.releasedOK) == 0 || (!m.rolledAt.IsZero() && time.Since(m.rolledAt) < m.maxLease+2*m.maxBeat+slack) {
		return
	}
	ctx := context.Background()
	for _, lk := range smLocks {
		st, err := m.reader.Inspect(ctx, lk.kind, lk.name)
		if err != nil {
			continue // a fault under way; the next check reads again
		}
		for _, h := range st.Holders {
			if m.releasedOK[h.Token] {
				rt.Fatalf("%s: %s, released, is a live holder %v after the last rollback: events %v; faults %v", lk.name, h.Token,
					time.Since(m.rolledAt).Round(time.Millisecond), m.valid.events[h.Token], m.valid.events[""])
			}
		}
	}
}

// checkFIFO: among waiters of one generation, never requeued, on live
// Lockers, of one group and one priority, grants follow arrival; and a waiter that arrived before one
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
				if a.gen == b.gen && a.group == b.group && a.priority == b.priority && a.arrival < b.arrival && a.lease.Fence() > b.lease.Fence() && m.oneHistory(a, b) {
					rt.Fatalf("%s: a waiter that arrived at step %d was granted fence %d after one that arrived at step %d (fence %d)\n%v; events %v\n%v; events %v\nfaults %v",
						smLocks[lock].name, a.arrival, a.lease.Fence(), b.arrival, b.lease.Fence(),
						a, m.valid.events[a.lease.Token()], b, m.valid.events[b.lease.Token()], m.valid.events[""])
				}
			}
		}
		m.mu.Lock()
		for _, c := range m.pending {
			if c.lock != lock || c.arrival == 0 || c.requeued || m.lockers[c.locker].dead {
				continue
			}
			for _, b := range got {
				if b.gen == c.gen && b.group == c.group && b.priority == c.priority && c.arrival < b.arrival && time.Since(b.granted) > m.maxBeat+slack && m.sinceFault() > m.maxLease+m.maxBeat {
					m.mu.Unlock()
					rt.Fatalf("%s: the waiter that arrived at step %d still waits, though one that arrived at step %d was granted %v ago",
						smLocks[lock].name, c.arrival, b.arrival, time.Since(b.granted).Round(time.Millisecond))
				}
			}
		}
		m.mu.Unlock()
	}
}

// oneHistory tells whether no rollback came between the start of a's or
// b's Acquire, whichever was first, and the return of the other, nor
// overlapped that span: a rollback (or a FLUSHALL, a rollback to nothing)
// starts another history of the queue, and FIFO is promised within one. A waiter passed over as dead in the history Redis lost
// (its Locker's renewal late beyond its waiter TTL) can be back in the
// queue after it, and granted after the waiter that took its turn there.
func (m *machine) oneHistory(a, b *smLease) bool {
	from, to := a.started, a.returned
	if b.started.Before(from) {
		from = b.started
	}
	if b.returned.After(to) {
		to = b.returned
	}
	for _, r := range m.rollbacks {
		if r.to.After(from) && r.from.Before(to) {
			return false
		}
	}
	return true
}

// An smSpan is a stretch of time: a rollback's, from the moment its
// server stops serving the history it loses (a grant after that is the
// new history's, even before the rollback's step ends) to the end of its
// step.
type smSpan struct{ from, to time.Time }

// smRead reads keys of a lock at once, so that no script runs between
// the reads, and returns each as a list of strings: a list's items, a
// sorted set's members and scores, a hash's fields and values, a string
// alone. A script, not a MULTI: Redis at full memory refuses a MULTI, not
// a script that only reads.
var smRead = redis.NewScript(`
local out = {}
for i, key in ipairs(KEYS) do
  local t = redis.call('TYPE', key).ok
  if t == 'list' then out[i] = redis.call('LRANGE', key, 0, -1)
  elseif t == 'zset' then out[i] = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  elseif t == 'hash' then out[i] = redis.call('HGETALL', key)
  elseif t == 'string' then out[i] = {redis.call('GET', key)}
  else out[i] = {} end
end
return out`)

// read reads keys with smRead.
func (m *machine) read(rt *rapid.T, keys ...string) [][]string {
	reply, err := smRead.EvalRO(context.Background(), m.rdb, keys).Slice()
	if err != nil {
		rt.Fatalf("reading %v: %v", keys, err)
	}
	out := make([][]string, len(reply))
	for i, v := range reply {
		for _, item := range v.([]any) {
			out[i] = append(out[i], item.(string))
		}
	}
	return out
}

// pairs reads a flat list of names and values (a sorted set's members
// and scores, a hash's fields and values) into names in order and a map.
func pairs(flat []string) ([]string, map[string]string) {
	var names []string
	values := map[string]string{}
	for i := 0; i+1 < len(flat); i += 2 {
		names = append(names, flat[i])
		values[flat[i]] = flat[i+1]
	}
	return names, values
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
		// One read of every key, lines included: a script between two
		// reads could move a token from one to the other.
		var lanes []string
		for lane := range fairlock.MaxPriority + 1 {
			lanes = append(lanes, laneKey(base, "", lane))
		}
		r := m.read(rt, append([]string{base + "order", base + "holders", base + "state", base + "fence"}, lanes...)...)
		fence := r[3]
		holders, _ := pairs(r[1])
		_, state := pairs(r[2])
		if lk.limit > 0 {
			m.checkGroups(rt, base, lk)
		} else {
			m.checkLines(rt, lk, base, r[0], map[string]string{}, lanes, r[4:])
		}
		// A counter a rollback set back is below the fences seen until the
		// next grant, which draws from the clock, above every fence before.
		if len(fence) == 1 && !m.lagging[lock] {
			var f int64
			fmt.Sscan(fence[0], &f)
			if f < m.maxSeen[lock] {
				rt.Fatalf("%s: fence counter %d below a fence handed out, %d", lk.name, f, m.maxSeen[lock])
			}
		}
		if lk.kind == fairlock.LockMutex {
			continue
		}
		sum, writers := 0, 0
		for _, tok := range holders {
			w := tokenWeight(tok)
			sum += w
			if w == fairlock.MaxCapacity {
				writers++
			}
		}
		if sum > lk.cap || (writers > 0 && len(holders) > 1) {
			rt.Fatalf("%s: holders %v hold %d permits of %d", lk.name, holders, sum, lk.cap)
		}
		if used, ok := state["used"]; ok && used != fmt.Sprint(sum) {
			rt.Fatalf("%s: state counts %s permits in use, its holders %d (%v)", lk.name, used, sum, holders)
		}
	}
}

// laneKey is the key of the line of group's waiters of priority lane
// (scripts/lib/counted/queue.lua's line).
func laneKey(base, group string, lane int) string {
	switch {
	case group == "" && lane == 0:
		return base + "queue"
	case group == "":
		return fmt.Sprintf("%squeue:%d", base, lane)
	case lane == 0:
		return base + "gq:" + group
	}
	return fmt.Sprintf("%sgq%d:%s", base, lane, group)
}

// tokenLane is the priority a token asks for.
func tokenLane(token string) int {
	if _, rest, ok := strings.Cut(token, "!"); ok && rest != "" {
		return int(rest[0] - '0')
	}
	return 0
}

// checkLines checks that the lines (their keys, and their tokens) together
// hold the order set's tokens (orderFlat: members and scores), once each,
// each line in arrival order, each token in the line of its priority and
// (with groups: state's g: fields) of its group, scored below 0 exactly
// when its priority is above 0.
func (m *machine) checkLines(rt *rapid.T, lk smLock, base string, orderFlat []string, state map[string]string, keys []string, lines [][]string) {
	order, scores := pairs(orderFlat)
	arrival := map[string]float64{}
	for _, tok := range order {
		var at float64
		fmt.Sscan(scores[tok], &at)
		arrival[tok] = at
	}
	lined := map[string]bool{}
	for i, line := range lines {
		last := math.Inf(-1)
		for _, tok := range line {
			at, ok := arrival[tok]
			if !ok || at <= last || lined[tok] || laneKey(base, state["g:"+tok], tokenLane(tok)) != keys[i] ||
				(at < 0) != (tokenLane(tok) > 0) {
				rt.Fatalf("%s: line %s has %s out of place (line %v, order %v, its group %q)", lk.name, keys[i], tok, line, orderFlat, state["g:"+tok])
			}
			last = at
			lined[tok] = true
		}
	}
	var unlined []string
	for _, tok := range order {
		if !lined[tok] {
			unlined = append(unlined, tok)
		}
	}
	if len(unlined) > 0 {
		m.checkUnlinedDead(rt, lk, base, keys, unlined)
	}
}

// checkUnlinedDead checks that the waiters of the order set that no line
// held are dead, in one more read of the order set, the lines and their
// sessions' keys. A waiter's line is kept by its own Locker only (a
// heartbeat keeps the lines of its waiters), the order set by every
// Locker with a party there: once a waiter's Locker died, the line may
// expire before the order set that a Locker with longer TTLs kept, with
// the dead waiter still in it. That is harmless: the grant loop passes
// over the dead, and the next scan drops it from the order set. A live
// waiter in no line would never be granted.
func (m *machine) checkUnlinedDead(rt *rapid.T, lk smLock, base string, lineKeys, unlined []string) {
	keys := append([]string{base + "order"}, lineKeys...)
	for _, tok := range unlined {
		session := "fairlock:session:" + tok[:strings.Index(tok, ":")]
		keys = append(keys, session, session+":w")
	}
	r := m.read(rt, keys...)
	order, _ := pairs(r[0])
	queued := map[string]bool{}
	for _, tok := range order {
		queued[tok] = true
	}
	for _, line := range r[1 : 1+len(lineKeys)] {
		for _, tok := range line {
			delete(queued, tok)
		}
	}
	sessions := r[1+len(lineKeys):]
	for i, tok := range unlined {
		_, fields := pairs(sessions[2*i])
		_, open := fields[""]
		if queued[tok] && open && len(sessions[2*i+1]) > 0 && fields[tok] != "x" {
			rt.Fatalf("%s: %s, a live waiter, is in the order set and in no line (order %v)", lk.name, tok, order)
		}
	}
}

// checkGroups checks a grouped semaphore: its groups' lines, one per group
// and priority, together hold the order set's tokens (checkLines); each
// group's count of permits is the sum over its holders, and within the
// limit; and the groups' clocks (checkClocks).
func (m *machine) checkGroups(rt *rapid.T, base string, lk smLock) {
	keys := []string{base + "order", base + "state", base + "holders"}
	for lane := range fairlock.MaxPriority + 1 {
		keys = append(keys, groupsSetKey(base, lane))
	}
	var lineKeys []string
	for _, g := range smGroups {
		for lane := range fairlock.MaxPriority + 1 {
			lineKeys = append(lineKeys, laneKey(base, g, lane))
		}
	}
	r := m.read(rt, append(keys, lineKeys...)...)
	order, _ := pairs(r[0])
	_, state := pairs(r[1])
	holders, _ := pairs(r[2])
	m.checkLines(rt, lk, base, r[0], state, lineKeys, r[len(keys):])
	held := map[string]int{}
	for _, tok := range holders {
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
	m.checkClocks(rt, lk, state, holders, order, r[3:len(keys)])
}

// isLaneMember tells whether a state field's kind (before its ":") is a
// member field of a priority above 0: "m1" to "m9".
func isLaneMember(kind string) bool {
	return len(kind) == 2 && kind[0] == 'm' && kind[1] >= '1' && kind[1] <= '9'
}

// isLaneField tells whether a state field's kind is a group's member or
// clock in a lane above 0: "m1" to "m9", "v1" to "v9".
func isLaneField(kind string) bool {
	return len(kind) == 2 && (kind[0] == 'm' || kind[0] == 'v') && kind[1] >= '1' && kind[1] <= '9'
}

// groupsSetKey is the key of the groups set of priority lane.
func groupsSetKey(base string, lane int) string {
	if lane == 0 {
		return base + "groups"
	}
	return fmt.Sprintf("%sgroups:%d", base, lane)
}

// checkClocks checks what a grouped semaphore's state keeps for its
// groups' clocks (lib/counted/queue.lua): a grant record (t:) only for a
// holder; a party's group (g:) only for a holder or a waiter; a group's
// fields only while it has a party; and each priority's groups set lists
// each group whose line there has a head its limit lets in, with its
// member and its clock as the state says (the member's field is m:<group>
// for priority 0, m<priority>:<group> for the others), as many as the
// state's count of them says. After a rollback, which can tear the
// parties and the sets from the state, all but the count wait until a scan
// has mended them. Outside grouped mode none of them is kept.
func (m *machine) checkClocks(rt *rapid.T, lk smLock, state map[string]string, holders, order []string, groupSets [][]string) {
	party := map[string]bool{}
	for _, tok := range append(slices.Clone(holders), order...) {
		party[tok] = true
	}
	grouped := state["grouped"] != "" && state["grouped"] != "0"
	mended := m.scannedSinceRollback(state)
	hasParty := map[string]bool{}
	for tok := range party {
		if g, ok := state["g:"+tok]; ok {
			hasParty[g] = true
		} else if grouped {
			hasParty[""] = true
		}
	}
	for f := range state {
		kind, rest, ok := strings.Cut(f, ":")
		if !ok || !(len(kind) == 1 && strings.Contains("tghvewml", kind) || isLaneField(kind)) {
			continue
		}
		switch {
		case !grouped:
			rt.Fatalf("%s: not in grouped mode, the state still keeps %s", lk.name, f)
		case !mended:
			// The parties a rollback tore from the state are forgotten
			// at the next scan (mendGroups).
		case kind == "t" && !slices.Contains(holders, rest):
			rt.Fatalf("%s: grant record %s of no holder (holders %v)", lk.name, f, holders)
		case kind == "g" && !party[rest]:
			rt.Fatalf("%s: group of %s, neither holder nor waiter", lk.name, f)
		case kind != "t" && kind != "g" && !hasParty[rest]:
			rt.Fatalf("%s: %s kept for group %q, which has no party", lk.name, f, rest)
		}
	}
	members := 0
	for f := range state {
		if kind, _, ok := strings.Cut(f, ":"); ok && (kind == "m" || isLaneMember(kind)) {
			members++
		}
	}
	if n, _ := strconv.Atoi(state["placed"]); n != members {
		rt.Fatalf("%s: the state counts %q placed groups, and has %d member fields", lk.name, state["placed"], members)
	}
	if !mended {
		return
	}
	placed := 0
	for lane, set := range groupSets {
		members, scores := pairs(set)
		field, clock := "m:", "v:"
		if lane > 0 {
			field, clock = fmt.Sprintf("m%d:", lane), fmt.Sprintf("v%d:", lane)
		}
		for _, member := range members {
			_, g, _ := strings.Cut(member, ":")
			if state[field+g] != member || state[clock+g] != scores[member] {
				rt.Fatalf("%s: groups set %d has %s at clock %s; the state says member %q, clock %q", lk.name, lane, member, scores[member], state[field+g], state[clock+g])
			}
			if lane > 0 && !strings.Contains(state["l:"+g], fmt.Sprint(lane)) {
				rt.Fatalf("%s: group %q placed at priority %d, not among its lanes %q", lk.name, g, lane, state["l:"+g])
			}
			placed++
		}
	}
	if placed != members {
		rt.Fatalf("%s: the groups sets list %d members, the state %d", lk.name, placed, members)
	}
}

// scannedSinceRollback tells whether a scan ran since the last rollback,
// from state's scanAt: the next scan's time (server ms), which a scan
// books at most 3/4 of a heartbeat ahead (lib/maintain.lua).
func (m *machine) scannedSinceRollback(state map[string]string) bool {
	if m.rollbackAt.IsZero() {
		return true
	}
	at, _ := strconv.ParseInt(state["scanAt"], 10, 64)
	return at-(3*m.maxBeat/4).Milliseconds() > m.rollbackAt.UnixMilli()
}

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
			if !held[h.Token] && !m.multiHolds(h) {
				m.valid.mu.Lock()
				id, _, _ := strings.Cut(h.Token, ".")
				evs, faults, who := m.valid.events[h.Token], m.valid.events[""], m.valid.events["locker:"+id]
				m.valid.mu.Unlock()
				var owner string
				if len(who) > 0 {
					var i int
					fmt.Sscan(who[0], &i)
					owner = fmt.Sprintf("locker %d (dead %v, TTLs %v/%v)", i, m.lockers[i].dead, m.lockers[i].lease, m.lockers[i].waiter)
				}
				rt.Fatalf("%s: Redis has a live holder %s (%s, TTL %v) that no caller holds (a call told it failed, or a dead Locker): its events %v; faults %v", lk.name, h.Token, owner, h.TTL, evs, faults)
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

// multiHolds tells whether h is held by an AcquireBoth call still under
// way: it may hold one mutex while it waits for the other.
func (m *machine) multiHolds(h fairlock.Holder) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.pending {
		if c.multi != "" && c.multi == h.Metadata && !m.lockers[c.locker].dead {
			return true
		}
	}
	return false
}

// finish ends every call and lease and closes the Lockers: then only fence
// keys are left.
func (m *machine) finish(rt *rapid.T) {
	if m.full {
		setFullMemory(m.t, m.rdb, false)
	}
	for _, h := range m.held {
		m.let(h)
	}
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
	deadline := time.Now().Add(m.maxLease + m.maxBeat + slack)
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

// smMachines is how many state machines run side by side, each on its own
// pair of servers, each with the budget of -rapid.checks: most of a step's
// time is spent waiting on TTLs, so three explore three times as many
// sequences in the time of one.
const smMachines = 3

func TestStateMachine(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs random sequences on a real redis-server")
	}
	machines := make([]redistest.Subtest, smMachines)
	for i := range machines {
		machines[i] = redistest.Subtest{Name: fmt.Sprint("machine-", i), Test: runStateMachine}
	}
	redistest.SideBySide(t, machines...)
}

// runStateMachine checks random sequences on a pair of servers of its own,
// with TestMain's budget, or -rapid.checks and -rapid.steps.
func runStateMachine(t *testing.T) {
	pair := redistest.StartPair(t)
	rdb := redis.NewClient(&redis.Options{Addr: pair.Proxy.Addr})
	t.Cleanup(func() { rdb.Close() })
	m := &machine{t: t, pair: pair, rdb: rdb, hits: map[string]int{}}
	m.reader = newLocker(t, m.rdb)
	steps := 0
	actions := rapid.StateMachineActions(m)
	// Faults more often than the rest (rapid draws an action name
	// uniformly): a fault armed on the network takes effect only if its
	// Locker sends what it waits for meanwhile.
	for name, weight := range map[string]int{"HoldRequest": 4, "HoldReply": 4, "LoseReply": 4, "ReleaseHeld": 4,
		"Duplicate": 2, "Kill": 2, "FullMemory": 2, "ScriptFlush": 2, "Stall": 3, "Failover": 3, "RestoreSnapshot": 2} {
		for i := 1; i < weight; i++ {
			actions[fmt.Sprintf("%s%d", name, i)] = actions[name]
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		m.init(rt)
		rt.Repeat(actions)
		steps += m.step
		m.finish(rt)
	})
	t.Logf("%d steps checked; faults that took effect: %v; %d calls shared a round trip", steps, m.hits, m.batched.Load())
}

// A validity keeps, for each lock, the spans in which a lease was valid as
// its holder sees it, and checks that they never hold more than the lock's
// capacity at once.
type validity struct {
	mu sync.Mutex
	// events is what each token went through, the faults (under "") and
	// each Locker's index (under "locker:<id>"), for a failure's message.
	events map[string][]string
	spans  []*span
	open   map[string]*span     // by token, while valid
	endsAt map[string]time.Time // a lease's end, if it came before its start was stamped
	// flushed is when the last FLUSHALL returned. A call asked before it
	// may have been granted before it too, with the reply read after: its
	// lease is left out of the check, as the ones cut by the FLUSHALL are.
	flushed time.Time
}

type span struct {
	lock, permits int
	start, end    time.Time // end zero while valid
	what, token   string    // who held it, and its token ("" for Do's)
	how           string    // how it ended
}

func (sp *span) String() string {
	end := "valid"
	if !sp.end.IsZero() {
		end = sp.end.Format("15:04:05.000000") + " (" + sp.how + ")"
	}
	return fmt.Sprintf("%s %s..%s", sp.what, sp.start.Format("15:04:05.000000"), end)
}

func newValidity() *validity {
	return &validity{open: map[string]*span{}, endsAt: map[string]time.Time{}, events: map[string][]string{}}
}

// validAt says which spans of lock were valid at t, with their tokens'
// events, and the faults. v.mu is held.
func (v *validity) validAt(lock int, t time.Time) string {
	var b strings.Builder
	for _, sp := range v.spans {
		if sp.lock == lock && !sp.start.After(t) && (sp.end.IsZero() || sp.end.After(t)) {
			fmt.Fprintf(&b, "%s %v; ", sp, v.events[sp.token])
		}
	}
	fmt.Fprintf(&b, "faults %v", v.events[""])
	return b.String()
}

// log notes what under key.
func (v *validity) log(token, what string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.events[token] = append(v.events[token], what)
}

// began opens the span of the lease token, asked for at asked and
// returned by Acquire at t.
func (v *validity) began(what, token string, lock, permits int, asked, t time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	sp := &span{lock: lock, permits: permits, start: t, what: what, token: token, how: "lost early"}
	v.spans = append(v.spans, sp)
	if asked.Before(v.flushed) {
		sp.end, sp.how = t, "asked before a flushall"
		return
	}
	if end, ok := v.endsAt[token]; ok {
		sp.end = end
		return
	}
	v.open[token] = sp
}

// ended closes the span of the lease token at t, for the reason how.
func (v *validity) ended(token, how string, t time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if sp := v.open[token]; sp != nil {
		sp.end, sp.how = t, how
		delete(v.open, token)
		return
	}
	if _, ok := v.endsAt[token]; !ok {
		v.endsAt[token] = t
	}
}

// cut ends every span still valid at t, for the check.
func (v *validity) cut(t time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for token, sp := range v.open {
		sp.end, sp.how = t, "flushall"
		delete(v.open, token)
	}
	v.flushed = t
}

// span adds a closed span (Do's fn), for a call asked at asked.
func (v *validity) span(lock, permits int, asked, start, end time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if asked.Before(v.flushed) {
		return
	}
	v.spans = append(v.spans, &span{lock: lock, permits: permits, start: start, end: end, what: "do", how: "fn returned"})
}

// check sweeps each lock's spans: at no instant may the valid leases hold
// more than its capacity (a writer holds all of a read-write lock's).
func (v *validity) check(rt *rapid.T) {
	v.mu.Lock()
	defer v.mu.Unlock()
	type edge struct {
		at    time.Time
		delta int
	}
	for lock, lk := range smLocks {
		var edges []edge
		for _, sp := range v.spans {
			if sp.lock != lock {
				continue
			}
			edges = append(edges, edge{sp.start, sp.permits})
			if !sp.end.IsZero() {
				edges = append(edges, edge{sp.end, -sp.permits})
			}
		}
		// At one instant, ends come before starts: a span is [start, end).
		sort.Slice(edges, func(a, b int) bool {
			if !edges[a].at.Equal(edges[b].at) {
				return edges[a].at.Before(edges[b].at)
			}
			return edges[a].delta < edges[b].delta
		})
		held := 0
		for _, e := range edges {
			if held += e.delta; held > lk.cap {
				rt.Fatalf("%s: leases valid at once hold %d permits at %v, over its capacity %d: %s", lk.name, held,
					e.at.Format("15:04:05.000000"), lk.cap, v.validAt(lock, e.at))
			}
		}
	}
}
