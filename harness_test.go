package fairlock_test

// The process harness of the fault suite.
//
// Holders and waiters run as separate OS processes: the test binary re-execs
// itself with -test.run=^TestHelperProcess$ and FL_HELPER=agent. An agent owns
// one Locker and obeys line commands on stdin (see agentMain); it reports what
// happens as "EV key=value ..." lines on stdout, stamped with CLOCK_MONOTONIC,
// which is one clock for every process on a Linux machine, so the parent can
// merge the histories of all processes into one order. The parent records its
// own actions (kills, pauses, its own leases) on the same clock.
//
// Every agent is killed by PID when its test ends, and exits by itself when its
// stdin closes (the parent died) or after FL_DEADLINE.

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"

	"github.com/fairlock/fairlock/fairlock"
)

// monoNow is CLOCK_MONOTONIC in nanoseconds: system-wide on Linux, so the
// stamps of different processes compare.
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

func dur(ns int64) time.Duration { return time.Duration(ns) }

// Ev is one line of history.
type Ev struct {
	T     int64  // CLOCK_MONOTONIC ns
	Proc  string // process id ("parent", "p1", ...)
	W     string // waiter id, unique per Acquire call ("p1.w3")
	L     string // lock name (on "call" events)
	Kind  string // ready call queued granted acqerr rel ext write lost done kill stop cont ...
	Fence int64
	Pos   int
	Tok   string
	Err   string // "ok", "notheld", "lost", "canceled", ...
	N     int64  // free number (counter value, count)
	// On "call" events: what was asked for (see Req). Lk is "mutex", "sem",
	// "read" or "write"; Cap the capacity and Per the permits, as the
	// checker counts them (a writer takes all of MaxCapacity).
	Lk       string
	Cap, Per int64
}

func (e Ev) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "EV t=%d p=%s k=%s", e.T, e.Proc, e.Kind)
	str := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, " %s=%s", k, v)
		}
	}
	num := func(k string, v int64) {
		if v != 0 {
			fmt.Fprintf(&b, " %s=%d", k, v)
		}
	}
	str("w", e.W)
	str("l", e.L)
	num("f", e.Fence)
	num("pos", int64(e.Pos))
	str("tok", e.Tok)
	str("err", e.Err)
	num("n", e.N)
	str("lk", e.Lk)
	num("cap", e.Cap)
	num("per", e.Per)
	return b.String()
}

func parseEv(line string) (Ev, bool) {
	if !strings.HasPrefix(line, "EV ") {
		return Ev{}, false
	}
	var e Ev
	strs := map[string]*string{"p": &e.Proc, "k": &e.Kind, "w": &e.W, "l": &e.L, "tok": &e.Tok, "err": &e.Err, "lk": &e.Lk}
	nums := map[string]*int64{"t": &e.T, "f": &e.Fence, "n": &e.N, "cap": &e.Cap, "per": &e.Per}
	for _, f := range strings.Fields(line[3:]) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		if p := strs[k]; p != nil {
			*p = v
		} else if p := nums[k]; p != nil {
			*p, _ = strconv.ParseInt(v, 10, 64)
		} else if k == "pos" {
			e.Pos, _ = strconv.Atoi(v)
		}
	}
	return e, e.Kind != ""
}

// errClasses are the one-word names of errors in the history, first match
// first.
var errClasses = []struct {
	err  error
	name string
}{
	{fairlock.ErrNotHeld, "notheld"},
	{fairlock.ErrLost, "lost"},
	{fairlock.ErrReleased, "released"},
	{fairlock.ErrClosed, "closed"},
	{fairlock.ErrNotAcquired, "notacquired"},
	{context.Canceled, "canceled"},
	{context.DeadlineExceeded, "deadline"},
	{errRejected, "rejected"},
}

// errClass names an error in one word for the history.
func errClass(err error) string {
	if err == nil {
		return "ok"
	}
	for _, c := range errClasses {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return "other:" + strings.Join(strings.Fields(err.Error()), "_")
}

// Req is what one Acquire asks for: the mutex, N permits of a semaphore of
// capacity Cap, or a read-write lock as reader or writer. Its String form
// ("mutex", "sem:3:2", "read", "write") travels in agent commands.
type Req struct {
	Kind string // "mutex", "sem", "read", "write", "elect" (a campaign)
	Cap  int    // semaphore capacity
	N    int    // semaphore permits
}

var (
	mutexReq = Req{Kind: "mutex"}
	electReq = Req{Kind: "elect"}
	readReq  = Req{Kind: "read"}
	writeReq = Req{Kind: "write"}
)

func semReq(capacity, n int) Req { return Req{Kind: "sem", Cap: capacity, N: n} }

func (r Req) String() string {
	if r.Kind == "sem" {
		return fmt.Sprintf("sem:%d:%d", r.Cap, r.N)
	}
	return r.Kind
}

// parseReq reads Req.String's form; anything else is the mutex.
func parseReq(s string) Req {
	f := strings.Split(s, ":")
	switch {
	case f[0] == "sem" && len(f) == 3:
		c, _ := strconv.Atoi(f[1])
		n, _ := strconv.Atoi(f[2])
		return semReq(c, n)
	case f[0] == "read" || f[0] == "write" || f[0] == "elect":
		return Req{Kind: f[0]}
	}
	return mutexReq
}

// permits is what r takes of what capacity, as the checker counts them:
// the mutex 1 of 1, a reader 1 of MaxCapacity and a writer all of it, as
// the library's engine does.
func (r Req) permits() (capacity, n int64) {
	switch r.Kind {
	case "sem":
		return int64(r.Cap), int64(r.N)
	case "read":
		return fairlock.MaxCapacity, 1
	case "write":
		return fairlock.MaxCapacity, fairlock.MaxCapacity
	}
	return 1, 1
}

// family is the primitive of a lock kind ("mutex", "sem", "rw" or
// "elect"): they are independent even under one name.
func family(kind string) string {
	switch kind {
	case "sem", "elect":
		return kind
	case "read", "write":
		return "rw"
	}
	return "mutex"
}

// acquireFunc is one Acquire-like call with its lock and request bound.
type acquireFunc func(context.Context, ...fairlock.AcquireOption) (*fairlock.Lease, error)

// acquirer returns the call of l that acquires r on name: the waiting one,
// or the Try one if try. An election's is a Campaign, whose term's lease
// it returns; it has no Try.
func acquirer(l *fairlock.Locker, r Req, name string, try bool) (acquireFunc, error) {
	switch r.Kind {
	case "elect":
		el, err := l.Election(name)
		if err != nil || try {
			return nil, errors.Join(err, errors.New("an election has no TryAcquire"))
		}
		return func(ctx context.Context, o ...fairlock.AcquireOption) (*fairlock.Lease, error) {
			term, err := el.Campaign(ctx, fmt.Sprint(monoNow()), o...)
			if err != nil {
				return nil, err
			}
			return term.Lease(), nil
		}, nil
	case "sem":
		s, err := l.Semaphore(name, r.Cap)
		if err != nil {
			return nil, err
		}
		if try {
			return func(ctx context.Context, o ...fairlock.AcquireOption) (*fairlock.Lease, error) {
				return s.TryAcquire(ctx, r.N, o...)
			}, nil
		}
		return func(ctx context.Context, o ...fairlock.AcquireOption) (*fairlock.Lease, error) {
			return s.Acquire(ctx, r.N, o...)
		}, nil
	case "read", "write":
		m, err := l.RWMutex(name)
		if err != nil {
			return nil, err
		}
		switch {
		case r.Kind == "read" && try:
			return m.TryRLock, nil
		case r.Kind == "read":
			return m.RLock, nil
		case try:
			return m.TryLock, nil
		}
		return m.Lock, nil
	}
	if try {
		return func(ctx context.Context, o ...fairlock.AcquireOption) (*fairlock.Lease, error) {
			return l.TryAcquire(ctx, name, o...)
		}, nil
	}
	return func(ctx context.Context, o ...fairlock.AcquireOption) (*fairlock.Lease, error) {
		return l.Acquire(ctx, name, o...)
	}, nil
}

// callEv is the "call" event of waiter w asking for r on name.
func callEv(w, name string, r Req) Ev {
	c, n := r.permits()
	return Ev{W: w, Kind: "call", L: name, Lk: r.Kind, Cap: c, Per: n}
}

// ---------------------------------------------------------------------------
// Parent side.

// History collects the events of every process of one test.
type History struct {
	mu     sync.Mutex
	evs    []Ev
	notify chan struct{}
}

func newHistory() *History { return &History{notify: make(chan struct{})} }

func (h *History) Add(e Ev) {
	if e.T == 0 {
		e.T = monoNow()
	}
	h.mu.Lock()
	h.evs = append(h.evs, e)
	close(h.notify)
	h.notify = make(chan struct{})
	h.mu.Unlock()
}

// Events returns a copy of the history sorted by time.
func (h *History) Events() []Ev {
	h.mu.Lock()
	out := append([]Ev(nil), h.evs...)
	h.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].T < out[j].T })
	return out
}

// Wait returns the first event matching pred, waiting up to d for it.
func (h *History) Wait(d time.Duration, pred func(Ev) bool) (Ev, bool) {
	deadline := time.After(d)
	seen := 0
	for {
		h.mu.Lock()
		for ; seen < len(h.evs); seen++ {
			if pred(h.evs[seen]) {
				e := h.evs[seen]
				h.mu.Unlock()
				return e, true
			}
		}
		ch := h.notify
		h.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			return Ev{}, false
		}
	}
}

// MustWait is Wait that fails the test on timeout.
func (h *History) MustWait(t testing.TB, d time.Duration, what string, pred func(Ev) bool) Ev {
	t.Helper()
	e, ok := h.Wait(d, pred)
	if !ok {
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
	return e
}

func (h *History) Count(pred func(Ev) bool) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, e := range h.evs {
		if pred(e) {
			n++
		}
	}
	return n
}

func isKind(w, kind string) func(Ev) bool {
	return func(e Ev) bool { return e.W == w && e.Kind == kind }
}

// isKindAfter matches like isKind, but only events stamped after t.
func isKindAfter(w, kind string, t int64) func(Ev) bool {
	return func(e Ev) bool { return e.W == w && e.Kind == kind && e.T > t }
}

// isEnd matches the end of waiter w's Acquire: a grant or an error.
func isEnd(w string) func(Ev) bool {
	return func(e Ev) bool { return e.W == w && (e.Kind == "granted" || e.Kind == "acqerr") }
}

// isProc matches the events of process proc of kind.
func isProc(proc, kind string) func(Ev) bool {
	return func(e Ev) bool { return e.Proc == proc && e.Kind == kind }
}

// Cluster is the set of processes of one test, sharing one history.
type Cluster struct {
	t     *testing.T
	Addr  string // where agents connect (Redis or a proxy in front of it)
	Lease time.Duration
	Wait  time.Duration
	H     *History
	n     int
}

func newCluster(t *testing.T, addr string, lease, waiter time.Duration) *Cluster {
	return &Cluster{t: t, Addr: addr, Lease: lease, Wait: waiter, H: newHistory()}
}

// Proc is one agent process.
type Proc struct {
	ID    string
	c     *Cluster
	cmd   *exec.Cmd
	in    io.WriteCloser
	mu    sync.Mutex
	nw    int
	errb  *tailBuffer
	exitc chan struct{}
}

type tailBuffer struct {
	mu   sync.Mutex
	b    []byte
	race []byte // from the first race detector report on, up to 32KB
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	if t.race == nil {
		if i := bytes.Index(p, []byte("WARNING: DATA RACE")); i >= 0 {
			t.race = append([]byte{}, p[i:]...)
		}
	} else if len(t.race) < 32<<10 {
		t.race = append(t.race, p...)
	}
	t.b = append(t.b, p...)
	if len(t.b) > 8192 {
		t.b = t.b[len(t.b)-8192:]
	}
	t.mu.Unlock()
	return len(p), nil
}

// Race returns the race detector's report, if the agent printed one.
func (t *tailBuffer) Race() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.race)
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// ProcOpt adds environment to an agent.
type ProcOpt func(env []string) []string

// viaAddr makes the agent connect to addr (a proxy) instead of the cluster's.
func viaAddr(addr string) ProcOpt {
	return func(env []string) []string { return append(env, "FL_ADDR="+addr) }
}

// reportParts makes the agent report each mutex of its transfers as a
// waiter of its own (xferParts).
func reportParts() ProcOpt {
	return func(env []string) []string { return append(env, "FL_PARTS=1") }
}

// observe makes the agent report the library's own events ("obs").
func observe() ProcOpt {
	return func(env []string) []string { return append(env, "FL_OBSERVE=1") }
}

// ctxTimeouts sets go-redis's ContextTimeoutEnabled in the agent's client.
func ctxTimeouts() ProcOpt {
	return func(env []string) []string { return append(env, "FL_CTX_TIMEOUTS=1") }
}

// readTimeout sets the agent's go-redis read timeout.
func readTimeout(d time.Duration) ProcOpt {
	return func(env []string) []string { return append(env, "FL_READ_TIMEOUT="+d.String()) }
}

// Spawn starts an agent process and waits until its Locker is ready.
func (c *Cluster) Spawn(opts ...ProcOpt) *Proc {
	c.t.Helper()
	p := c.start(opts...)
	c.ready(p)
	return p
}

// SpawnN starts n agents at once, then waits until each is ready: an
// agent's start (a test binary's, slower under -race) is most of its cost.
func (c *Cluster) SpawnN(n int, opts ...ProcOpt) []*Proc {
	c.t.Helper()
	ps := make([]*Proc, n)
	for i := range ps {
		ps[i] = c.start(opts...)
	}
	for _, p := range ps {
		c.ready(p)
	}
	return ps
}

// start starts an agent process.
func (c *Cluster) start(opts ...ProcOpt) *Proc {
	t := c.t
	t.Helper()
	c.n++
	id := "p" + strconv.Itoa(c.n)
	env := append(os.Environ(),
		"FL_HELPER=agent",
		"FL_ID="+id,
		"FL_ADDR="+c.Addr,
		"FL_LEASE="+c.Lease.String(),
		"FL_WAITER="+c.Wait.String(),
		"FL_DEADLINE=3m",
	)
	for _, o := range opts {
		env = o(env)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1", "-test.timeout=4m")
	cmd.Env = env
	p := &Proc{ID: id, c: c, cmd: cmd, errb: &tailBuffer{}, exitc: make(chan struct{})}
	cmd.Stderr = p.errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.in, err = cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start agent: %v", err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		syscall.Kill(pid, syscall.SIGKILL) //nolint:errcheck // may be gone already
		select {
		case <-p.exitc:
		case <-time.After(5 * time.Second):
			t.Errorf("agent %s (pid %d) did not exit after SIGKILL", id, pid)
		}
		if r := p.errb.Race(); r != "" {
			t.Errorf("agent %s (pid %d) hit a data race:\n%s", id, pid, r)
		}
		if t.Failed() {
			if s := p.errb.String(); strings.TrimSpace(s) != "" {
				t.Logf("stderr of agent %s:\n%s", id, s)
			}
		}
	})
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if e, ok := parseEv(sc.Text()); ok {
				c.H.Add(e)
			}
		}
		cmd.Wait() //nolint:errcheck // exit status of a killed agent is expected
		c.H.Add(Ev{Proc: id, Kind: "exit"})
		close(p.exitc)
	}()
	return p
}

// ready waits until agent p's Locker is ready.
func (c *Cluster) ready(p *Proc) {
	t, id := c.t, p.ID
	t.Helper()
	c.H.MustWait(t, 20*time.Second, id+" ready", func(e Ev) bool { return isProc(id, "ready")(e) || isProc(id, "fatal")(e) })
	if c.H.Count(isProc(id, "fatal")) > 0 {
		t.Fatalf("agent %s failed to start: %s", id, p.errb.String())
	}
}

// Send writes one command line to the agent.
func (p *Proc) Send(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.in, format+"\n", args...) //nolint:errcheck // a dead agent is the test's business
}

// NewW returns a fresh waiter id of this process.
func (p *Proc) NewW() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nw++
	return fmt.Sprintf("%s.w%d", p.ID, p.nw)
}

// Acquire asks the agent to start an Acquire of the mutex name. hold < 0
// keeps the lease until Release is sent; otherwise the agent releases after
// hold. Flags: "die" makes the agent SIGKILL itself as soon as Acquire
// returns; "try" makes it a TryAcquire; "verify" reports who holds the
// lock in Redis right after the grant.
func (p *Proc) Acquire(name string, hold time.Duration, flags ...string) string {
	return p.AcquireReq(mutexReq, name, hold, flags...)
}

// AcquireReq is Acquire of r on name: the mutex, a semaphore or a
// read-write lock.
func (p *Proc) AcquireReq(r Req, name string, hold time.Duration, flags ...string) string {
	w := p.NewW()
	fl := "-"
	if len(flags) > 0 {
		fl = strings.Join(flags, ",")
	}
	h := int64(-1)
	if hold >= 0 {
		h = hold.Microseconds()
	}
	p.Send("acq %s %s %d %s %s", w, name, h, fl, r)
	return w
}

func (p *Proc) Signal(sig syscall.Signal) int64 {
	kind := map[syscall.Signal]string{syscall.SIGKILL: "kill", syscall.SIGSTOP: "stop", syscall.SIGCONT: "cont"}[sig]
	t := monoNow()
	if err := syscall.Kill(p.cmd.Process.Pid, sig); err != nil {
		p.c.t.Fatalf("signal %v to %s: %v", sig, p.ID, err)
	}
	p.c.H.Add(Ev{T: t, Proc: p.ID, Kind: kind})
	if sig == syscall.SIGKILL {
		select {
		case <-p.exitc:
		case <-time.After(5 * time.Second):
			p.c.t.Fatalf("agent %s did not die", p.ID)
		}
	}
	return t
}

// ---------------------------------------------------------------------------
// Agent side: runs in the child process.

// TestHelperProcess is not a test: it is the body of agent processes.
func TestHelperProcess(t *testing.T) {
	if os.Getenv("FL_HELPER") != "agent" {
		return // only the body of re-exec'd agents; passes (rather than skips) in a normal run
	}
	agentMain()
	os.Exit(0)
}

type agent struct {
	id     string
	client *redis.Client
	opts   []fairlock.Option
	mu     sync.Mutex
	locker *fairlock.Locker
	leases map[string]*fairlock.Lease
	cancel map[string]context.CancelFunc
	// acquires are the "acq" commands' goroutines: "quit" lets them
	// report how their Acquire ended before the process exits.
	acquires sync.WaitGroup
	outmu    sync.Mutex
	out      *bufio.Writer
	// parts are the waiters of the transfer under way, by lock name: the
	// library's events on those locks report them (xferParts.report).
	parts atomic.Pointer[xferParts]
}

func (a *agent) emit(e Ev) {
	if e.T == 0 {
		e.T = monoNow()
	}
	e.Proc = a.id
	a.outmu.Lock()
	a.out.WriteString(e.String()) //nolint:errcheck
	a.out.WriteByte('\n')         //nolint:errcheck
	a.out.Flush()                 //nolint:errcheck
	a.outmu.Unlock()
}

func envDur(k string, def time.Duration) time.Duration {
	if v := os.Getenv(k); v != "" {
		d, err := time.ParseDuration(v)
		if err == nil {
			return d
		}
	}
	return def
}

func agentMain() {
	a := &agent{
		id:     os.Getenv("FL_ID"),
		out:    bufio.NewWriter(os.Stdout),
		leases: map[string]*fairlock.Lease{},
		cancel: map[string]context.CancelFunc{},
	}
	go func() {
		time.Sleep(envDur("FL_DEADLINE", 3*time.Minute))
		fmt.Fprintln(os.Stderr, "agent deadline reached")
		os.Exit(3)
	}()
	a.client = redis.NewClient(&redis.Options{
		Addr:         os.Getenv("FL_ADDR"),
		ReadTimeout:  envDur("FL_READ_TIMEOUT", 0),
		WriteTimeout: envDur("FL_READ_TIMEOUT", 0),
		DialTimeout:  time.Second,

		ContextTimeoutEnabled: os.Getenv("FL_CTX_TIMEOUTS") != "",
	})
	a.opts = []fairlock.Option{
		fairlock.WithLeaseTTL(envDur("FL_LEASE", time.Second)),
		fairlock.WithWaiterTTL(envDur("FL_WAITER", time.Second)),
	}
	// An observer only where a test asks for one: a Locker with an
	// observer counts its waiters' places, which the others do not.
	observeAll, reportParts := os.Getenv("FL_OBSERVE") != "", os.Getenv("FL_PARTS") != ""
	if observeAll || reportParts {
		a.opts = append(a.opts, a.observer(observeAll))
	}
	if err := a.newLocker(); err != nil {
		a.emit(Ev{Kind: "fatal", Err: errClass(err)})
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	a.emit(Ev{Kind: "ready"})
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		a.command(f)
	}
	// stdin closed: the parent is gone or done with us.
	os.Exit(0)
}

// observer reports the transfer parts' events (xferParts.report) and, with
// all, every library event as "obs", for diagnosis, with the kind in Err.
func (a *agent) observer(all bool) fairlock.Option {
	return fairlock.WithObserver(func(ev fairlock.Event) {
		if p := a.parts.Load(); p != nil {
			p.report(a, ev)
		}
		if !all {
			return
		}
		e := Ev{Kind: "obs", L: ev.Name, Tok: ev.Token, Fence: ev.Fence, Pos: ev.Position, Err: ev.Kind.String(), Lk: ev.Lock.String(), Per: int64(ev.Permits)}
		if ev.Err != nil {
			e.Err += "/" + errClass(ev.Err)
		}
		a.emit(e)
	})
}

func (a *agent) newLocker() error {
	l, err := fairlock.New(a.client, a.opts...)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.locker = l
	a.mu.Unlock()
	return nil
}

func (a *agent) getLocker() *fairlock.Locker {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.locker
}

// held returns the lease of w; if there is none, it reports kind with
// err "nolease" and returns nil.
func (a *agent) held(w, kind string) *fairlock.Lease {
	a.mu.Lock()
	l := a.leases[w]
	a.mu.Unlock()
	if l == nil {
		a.emit(Ev{W: w, Kind: kind, Err: "nolease"})
	}
	return l
}

// release releases l, the lease of w, and reports it, stamped before the
// call.
func (a *agent) release(w string, l *fairlock.Lease) {
	t := monoNow()
	err := l.Release(context.Background())
	a.emit(Ev{T: t, W: w, Kind: "rel", Err: errClass(err), Fence: l.Fence()})
}

// acquireAs calls acquire (r on name) for waiter w and reports the call,
// the queueing, and an error. It returns the lease and the time Acquire
// returned.
func (a *agent) acquireAs(ctx context.Context, acquire acquireFunc, w, name string, r Req) (*fairlock.Lease, int64, error) {
	a.emit(callEv(w, name, r))
	lease, err := acquire(ctx, fairlock.OnQueued(func(pos int) {
		a.emit(Ev{W: w, Kind: "queued", Pos: pos})
	}))
	t := monoNow()
	if err != nil {
		a.emit(Ev{T: t, W: w, Kind: "acqerr", Err: errClass(err)})
	}
	return lease, t, err
}

// acquirer is the package's acquirer on the agent's Locker; a request it
// refuses becomes a call that fails with that error.
func (a *agent) acquirer(r Req, name string, try bool) acquireFunc {
	acquire, err := acquirer(a.getLocker(), r, name, try)
	if err != nil {
		return func(context.Context, ...fairlock.AcquireOption) (*fairlock.Lease, error) { return nil, err }
	}
	return acquire
}

func (a *agent) command(f []string) {
	arg := func(i int) string {
		if i < len(f) {
			return f[i]
		}
		return ""
	}
	num := func(i int) int64 { n, _ := strconv.ParseInt(arg(i), 10, 64); return n }
	switch f[0] {
	case "acq": // acq W NAME HOLDµs FLAGS REQ
		// Its cancel is stored before the next command is read: stored by
		// the goroutine, it could come after a "cancel W" read first, on
		// a loaded machine, and the Acquire would wait on.
		ctx, cancel := context.WithCancel(context.Background())
		a.mu.Lock()
		a.cancel[arg(1)] = cancel
		a.mu.Unlock()
		w, name, holdUS, flags, req := arg(1), arg(2), num(3), arg(4), parseReq(arg(5))
		a.acquires.Go(func() { a.acquire(ctx, cancel, w, name, holdUS, flags, req) })
	case "rel": // rel W
		if l := a.held(arg(1), "rel"); l != nil {
			a.release(arg(1), l)
		}
	case "ext": // ext W MS
		l := a.held(arg(1), "ext")
		if l == nil {
			return
		}
		err := l.Extend(context.Background(), time.Duration(num(2))*time.Millisecond)
		a.emit(Ev{W: arg(1), Kind: "ext", Err: errClass(err)})
	case "write": // write W KEYPREFIX: fenced write of the lease's fence
		l := a.held(arg(1), "write")
		if l == nil {
			return
		}
		ok, err := fencedWrite(context.Background(), a.client, arg(2), l.Fence(), arg(1))
		res := "rejected"
		if ok {
			res = "accepted"
		}
		if err != nil {
			res = errClass(err)
		}
		a.emit(Ev{W: arg(1), Kind: "write", Err: res, Fence: l.Fence()})
	case "cancel": // cancel W
		a.mu.Lock()
		c := a.cancel[arg(1)]
		a.mu.Unlock()
		if c != nil {
			c()
		}
	case "contend": // contend NAME GOROUTINES DURms COUNTERKEY HOLDµs TRYGOROUTINES REQ,REQ,...
		var reqs []Req
		for _, r := range strings.Split(arg(7), ",") {
			reqs = append(reqs, parseReq(r))
		}
		go a.contend(arg(1), int(num(2)), time.Duration(num(3))*time.Millisecond, arg(4), time.Duration(num(5))*time.Microsecond, int(num(6)), reqs)
	case "transfer": // transfer W ACCOUNTS DURms: transfers between random accounts, as "xfer" events
		go a.transfers(arg(1), int(num(2)), time.Duration(num(3))*time.Millisecond)
	case "observe": // observe NAME: follow the election's leaders, as "leader" events
		go a.observe(arg(1))
	case "reset": // close the Locker and open a fresh one (fresh subscription)
		a.emit(Ev{Kind: "closing"})
		if err := a.getLocker().Close(); err != nil {
			a.emit(Ev{Kind: "reset", Err: errClass(err)})
		}
		err := a.newLocker()
		a.emit(Ev{Kind: "reset", Err: errClass(err)})
	case "quit":
		a.emit(Ev{Kind: "closing"}) // stamped before Close: the end of every lease it holds
		err := a.getLocker().Close()
		// Close ends every pending Acquire; their goroutines report it
		// (scenario 12 waits for an "acqerr" that an exit right after
		// Close cut off on a loaded machine).
		ended := make(chan struct{})
		go func() { a.acquires.Wait(); close(ended) }()
		select {
		case <-ended:
		case <-time.After(5 * time.Second):
		}
		a.emit(Ev{Kind: "quit", Err: errClass(err)})
		os.Exit(0)
	default:
		a.emit(Ev{Kind: "badcmd", Err: f[0]})
	}
}

// observe reports each leader of the election called name that Observe
// delivers: Fence is its epoch, N its revision, Tok its value.
func (a *agent) observe(name string) {
	el, err := a.getLocker().Election(name)
	if err != nil {
		a.emit(Ev{Kind: "observe", L: name, Err: errClass(err)})
		return
	}
	a.emit(Ev{Kind: "observing", L: name})
	for ld := range el.Observe(context.Background()) {
		a.emit(Ev{Kind: "leader", L: name, Fence: ld.Epoch, N: ld.Revision, Tok: ld.Value})
	}
}

func (a *agent) acquire(ctx context.Context, cancel context.CancelFunc, w, name string, holdUS int64, flags string, r Req) {
	defer cancel()
	lease, t, err := a.acquireAs(ctx, a.acquirer(r, name, strings.Contains(flags, "try")), w, name, r)
	if err != nil {
		return
	}
	if strings.Contains(flags, "die") {
		syscall.Kill(os.Getpid(), syscall.SIGKILL) //nolint:errcheck
	}
	if strings.Contains(flags, "verify") {
		// Does Redis give the lock to this lease right after Acquire
		// returned? Tok is the holder Redis names (the mutex) or the
		// lease's token if it is among the holders (the other kinds).
		holder, err := holderInRedis(context.Background(), a.client, name, r, lease.Token())
		if err != nil {
			holder = "none:" + errClass(err)
		}
		a.emit(Ev{W: w, Kind: "verify", Tok: holder, Err: errClass(lease.Err())})
	}
	if holdUS < 0 {
		// stored before the grant is reported, so that a command sent on
		// seeing the grant finds the lease
		a.mu.Lock()
		a.leases[w] = lease
		a.mu.Unlock()
	}
	a.emit(Ev{T: t, W: w, Kind: "granted", Fence: lease.Fence(), Tok: lease.Token()})
	if holdUS >= 0 {
		time.Sleep(time.Duration(holdUS) * time.Microsecond)
		a.release(w, lease)
		return
	}
	go func() {
		<-lease.Done()
		if errors.Is(lease.Err(), fairlock.ErrLost) {
			a.emit(Ev{W: w, Kind: "lost", Err: errClass(lease.Err()), Fence: lease.Fence()})
		}
	}()
}

// holderInRedis reads who holds name in Redis (plain names only: no
// escaping needed): the mutex's holder token, or for the other kinds token
// if it is among the holders and "none" if not.
func holderInRedis(ctx context.Context, c *redis.Client, name string, r Req, token string) (string, error) {
	if family(r.Kind) == "mutex" {
		return c.Get(ctx, fairlock.DefaultKeyPrefix+":{"+name+"}:lock").Result()
	}
	_, err := c.ZScore(ctx, fairlock.DefaultKeyPrefix+":{"+name+"}:"+family(r.Kind)+":holders", token).Result()
	if errors.Is(err, redis.Nil) {
		return "none", nil
	}
	return token, err
}

// writeWeight is what a writer adds to a contend counter: more than any
// number of readers there, so that the counter tells a writer's overlap.
const writeWeight = 1 << 20

// contend runs g goroutines that loop Acquire, a critical section, Release,
// for d; goroutine i asks for reqs[i%len(reqs)]. The first try of them use
// TryAcquire instead (a refusal is an "acqerr notacquired"), to check it
// never jumps the queue.
//
// The mutex's section is an unguarded read-modify-write of counterKey,
// right only under mutual exclusion. The other kinds' section adds its
// weight to counterKey on entry (its permits; 1 for a reader, writeWeight
// for a writer) and takes it away on exit: a value above the limit
// (capacity, or writeWeight) on entry is reported as "over", and the
// highest value seen as "peak".
func (a *agent) contend(name string, g int, d time.Duration, counterKey string, hold time.Duration, try int, reqs []Req) {
	l := a.getLocker()
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	var peak int64
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := reqs[i%len(reqs)]
			acquire, err := acquirer(l, r, name, i < try)
			if err != nil {
				a.emit(Ev{Kind: "rmwerr", Err: errClass(err)})
				return
			}
			for k := 0; time.Now().Before(end); k++ {
				w := fmt.Sprintf("%s.g%d.%d", a.id, i, k)
				ctx := context.Background()
				lease, t, err := a.acquireAs(ctx, acquire, w, name, r)
				if err != nil {
					if errors.Is(err, fairlock.ErrNotAcquired) {
						time.Sleep(2*time.Millisecond + time.Duration(rand.IntN(3000))*time.Microsecond)
					} else {
						time.Sleep(10 * time.Millisecond)
					}
					continue
				}
				a.emit(Ev{T: t, W: w, Kind: "granted", Fence: lease.Fence(), Tok: lease.Token()})
				if family(r.Kind) == "mutex" {
					a.readModifyWrite(ctx, w, counterKey, hold)
				} else {
					v := a.countedSection(ctx, w, counterKey, hold, r)
					mu.Lock()
					peak = max(peak, v)
					mu.Unlock()
				}
				a.release(w, lease)
				mu.Lock()
				n++
				mu.Unlock()
				if rand.IntN(4) == 0 {
					runtimeYield()
				}
			}
		}(i)
	}
	wg.Wait()
	a.emit(Ev{Kind: "peak", N: peak})
	a.emit(Ev{Kind: "contend-done", N: int64(n)})
}

// readModifyWrite is the mutex's critical section: an unguarded increment
// of counterKey, with hold between the read and the write.
func (a *agent) readModifyWrite(ctx context.Context, w, counterKey string, hold time.Duration) {
	v, err := a.client.Get(ctx, counterKey).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		a.emit(Ev{W: w, Kind: "rmwerr", Err: errClass(err)})
	}
	if hold > 0 {
		time.Sleep(hold)
	}
	if err := a.client.Set(ctx, counterKey, v+1, 0).Err(); err != nil {
		a.emit(Ev{W: w, Kind: "rmwerr", Err: errClass(err)})
	}
}

// countedSection is the critical section of a semaphore or read-write
// lock: r's weight is on counterKey for hold. It returns the value on
// entry.
func (a *agent) countedSection(ctx context.Context, w, counterKey string, hold time.Duration, r Req) int64 {
	weight, limit := int64(r.N), int64(r.Cap)
	if family(r.Kind) == "rw" {
		weight, limit = 1, writeWeight
		if r.Kind == "write" {
			weight = writeWeight
		}
	}
	v, err := a.client.IncrBy(ctx, counterKey, weight).Result()
	if err != nil {
		a.emit(Ev{W: w, Kind: "rmwerr", Err: errClass(err)})
	}
	if v > limit {
		a.emit(Ev{W: w, Kind: "over", N: v})
	}
	if hold > 0 {
		time.Sleep(hold)
	}
	if err := a.client.DecrBy(ctx, counterKey, weight).Err(); err != nil {
		a.emit(Ev{W: w, Kind: "rmwerr", Err: errClass(err)})
	}
	return v
}

// transfers moves 1 between two of accounts drawn at random, in a random
// direction, holding both accounts' mutexes ("acct:<i>") through a
// MultiMutex, until d has passed; each transfer's ctx is 10 s, longer than
// any wait without a deadlock. Each ends in an "xfer" event: Err "ok", the
// Acquire's error, or "rejected" if the store refused a fence; then
// "xferdone" with N the transfers done.
func (a *agent) transfers(w string, accounts int, d time.Duration) {
	var n int64
	for end := time.Now().Add(d); time.Now().Before(end); n++ {
		from, to := rand.IntN(accounts), rand.IntN(accounts-1)
		if to >= from {
			to++
		}
		ev := Ev{W: w, Kind: "xfer", L: fmt.Sprintf("acct:%d>acct:%d", from, to)}
		ev.Err = errClass(a.transfer(w, n, from, to))
		a.emit(ev)
	}
	a.emit(Ev{W: w, Kind: "xferdone", N: n})
}

// transfer is one transfer, the n-th of the waiter w. Each of its mutexes
// is a waiter of its own in the history ("<w>.<n>:<name>"), so that the
// checker judges each queue: called when the MultiMutex's Acquire is,
// queued, granted and lost as the library's events on that lock say, and
// ended when the MultiLease's Release is called (lost if it fails).
func (a *agent) transfer(w string, n int64, from, to int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	names := []string{fmt.Sprint("acct:", from), fmt.Sprint("acct:", to)}
	m, err := a.getLocker().MultiMutex(names...)
	if err != nil {
		return err
	}
	p := &xferParts{ws: map[string]string{}}
	p.acquiring.Store(true)
	for _, name := range names {
		p.ws[name] = fmt.Sprintf("%s.%d:%s", w, n, name)
		a.emit(Ev{W: p.ws[name], Kind: "call", L: name})
	}
	a.parts.Store(p)
	defer a.parts.Store(nil)
	lease, err := m.Acquire(ctx)
	p.acquiring.Store(false)
	if err != nil {
		for _, w := range p.ws {
			a.emit(Ev{W: w, Kind: "acqerr", Err: errClass(err)})
		}
		return err
	}
	defer func() {
		// Reported before the call: a process killed as it releases may
		// have released.
		for _, w := range p.ws {
			a.emit(Ev{W: w, Kind: "rel", Err: "ok"})
		}
		if err := lease.Release(context.Background()); err != nil {
			for _, w := range p.ws {
				a.emit(Ev{W: w, Kind: "lost", Err: errClass(err)})
			}
		}
	}()
	runtimeYield()
	ok, err := transferScript.Run(ctx, a.client, []string{accountKey(from), accountKey(to)},
		lease.Fence(fmt.Sprint("acct:", from)), lease.Fence(fmt.Sprint("acct:", to))).Int()
	if err == nil && ok == 0 {
		err = errRejected
	}
	return err
}

// xferParts are the waiters of one transfer's mutexes, by lock name.
type xferParts struct {
	ws        map[string]string
	acquiring atomic.Bool // its Acquire has not returned

	mu     sync.Mutex
	call   string          // the Acquire's Event.Multi, from its first enqueue or grant
	tokens map[string]bool // the tokens its parts queued under
}

// report adds the library's event ev to the history of the waiter it is
// about. Only an Acquire under way enqueues and is granted: the first such
// event names the call (Event.Multi), and a loss or release is its part's
// only if it names the same call (a lease of an earlier transfer can end
// late, beside this one). A part may lose its place (a grant expired
// unclaimed, on a machine that kept its process off the CPU for a waiter
// TTL) and the request queue again: its entry is the one of the token it
// is granted under, the grant itself if that token never queued. A part
// released while its Acquire is under way was given back by a failed or
// repeated request: it counts as lost at once, since the release came
// after its grant by an instant nobody stamped.
func (p *xferParts) report(a *agent, ev fairlock.Event) {
	w, ok := p.ws[ev.Name]
	if !ok || ev.Multi == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ev.Kind == fairlock.EventEnqueued || ev.Kind == fairlock.EventGranted {
		p.call = cmp.Or(p.call, ev.Multi)
	}
	if ev.Multi != p.call {
		return
	}
	switch {
	case ev.Kind == fairlock.EventEnqueued:
		if p.tokens == nil {
			p.tokens = map[string]bool{}
		}
		p.tokens[ev.Token] = true
		a.emit(Ev{W: w, Kind: "queued", Pos: ev.Position})
	case ev.Kind == fairlock.EventGranted:
		if !p.tokens[ev.Token] {
			a.emit(Ev{W: w, Kind: "queued"})
		}
		a.emit(Ev{W: w, Kind: "granted", Fence: ev.Fence})
	case ev.Kind == fairlock.EventLost, ev.Kind == fairlock.EventReleased && p.acquiring.Load():
		a.emit(Ev{W: w, Kind: "lost"})
	}
}

// accountKey is account i's balance and last fence, in a fenced store.
func accountKey(i int) string { return fmt.Sprintf("xfer:acct:%d", i) }

// errRejected: the store refused a fence.
var errRejected = errors.New("rejected")

// transferScript moves 1 from KEYS[1] to KEYS[2], each a hash of balance
// and the last fence it accepted, if neither fence (ARGV[1], ARGV[2]) is
// older than its account's last one: both or neither, as a database
// transaction would.
var transferScript = redis.NewScript(`
for i = 1, 2 do
  if tonumber(ARGV[i]) < tonumber(redis.call('HGET', KEYS[i], 'fence') or '0') then return 0 end
end
redis.call('HINCRBY', KEYS[1], 'balance', -1)
redis.call('HINCRBY', KEYS[2], 'balance', 1)
for i = 1, 2 do
  redis.call('HSET', KEYS[i], 'fence', ARGV[i])
  redis.call('PEXPIRE', KEYS[i], 600000)
end
return 1`)

func runtimeYield() { time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond) }

// fencedScript is the fenced resource: it accepts a write only with a fence
// larger than every fence it accepted before.
var fencedScript = redis.NewScript(`
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local f = tonumber(ARGV[1])
if f > cur then
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('RPUSH', KEYS[2], ARGV[2])
  return 1
end
return 0`)

func fencedWrite(ctx context.Context, c redis.Scripter, key string, fence int64, who string) (bool, error) {
	n, err := fencedScript.Run(ctx, c, []string{key + ":fence", key + ":log"}, fence, who).Int()
	return n == 1, err
}
