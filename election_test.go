package fairlock_test

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/fairlock/fairlock/internal/redistest"
)

// electKind is an election, as the fault scenarios see it: a mutex whose
// acquire is a Campaign.
var electKind = kind{name: "elect", label: "elect ", all: electReq, seq: []Req{electReq}, pairs: [][2]Req{{electReq, electReq}}}

// A candidate is one process that campaigns, through a proxy that can cut
// it off, and its campaign under way.
type candidate struct {
	p  *Proc
	px *redistest.Proxy
	w  string
}

// patience is how long a step of the election scenario may take before
// the test gives up: a limit on liveness, not a bound (each bound is
// checked on the events' stamps). On a loaded machine a step took more
// than 5 s (Valkey, beside CI's fuzzing and two other servers' suites).
const patience = 15 * time.Second

// TestElectionFaults: five candidate processes and three observer
// processes. Each leader writes to a fenced store with its epoch, then
// resigns, or is killed (SIGKILL), paused (SIGSTOP past its lease) or cut
// off from Redis, in turn, three times each. The next leader is elected
// within a hand-off (heartbeat) of a resignation and within lease TTL +
// heartbeat of the other faults; a leader cut off knows it lost before the
// next is elected; a paused one's write, after it resumes, is rejected.
// Every observer sees every leader, epochs strictly increasing; the
// history checker finds one leader at a time, in FIFO order of campaigns.
func TestElectionFaults(t *testing.T) {
	t.Parallel()
	const lease, waiterTTL = 400 * time.Millisecond, 250 * time.Millisecond
	e := newKindEnv(t, electKind, lease, waiterTTL)
	name, res := "leader", "elect-resource"
	observers := e.spawn(3)
	for _, o := range observers {
		o.Send("observe %s", name)
		e.c.H.MustWait(t, patience, o.ID+" observing", isProc(o.ID, "observing"))
	}
	campaign := func(c *candidate) { c.w = c.p.AcquireReq(electReq, name, -1) }
	var cands []*candidate
	for range 5 {
		px, p := e.spawnVia(t)
		c := &candidate{p: p, px: px}
		campaign(c)
		e.c.H.MustWait(t, patience, c.w+" queued or granted", func(ev Ev) bool {
			return ev.W == c.w && (ev.Kind == "queued" || ev.Kind == "granted")
		})
		cands = append(cands, c)
	}
	var epochs []int64
	worst := map[string]time.Duration{}
	faultAt, bound, fault := int64(0), time.Duration(0), ""
	// elected waits for the next leader, and checks its epoch and how long
	// after the last fault it came.
	elected := func() (*candidate, Ev) {
		t.Helper()
		c, ev := e.nextLeader(t, cands, faultAt)
		if fault != "" {
			d := dur(ev.T - faultAt)
			worst[fault] = max(worst[fault], d)
			if d > bound+slack {
				t.Errorf("the next leader was elected %v after the leader's %s; bound %v", d, fault, bound)
			}
		}
		if len(epochs) > 0 && ev.Fence <= epochs[len(epochs)-1] {
			t.Fatalf("epoch %d is not above the last one, %d", ev.Fence, epochs[len(epochs)-1])
		}
		epochs = append(epochs, ev.Fence)
		return c, ev
	}
	actions := []string{"resign", "kill", "pause", "cut"}
	for round := range 4 * 3 {
		leader, _ := elected()
		leader.p.Send("write %s %s", leader.w, res)
		if ev := e.await(t, leader.w, "write"); ev.Err != "accepted" {
			t.Fatalf("round %d: the leader's fenced write: %s", round, ev.Err)
		}
		switch action := actions[round%4]; action {
		case "resign":
			faultAt, bound, fault = e.releaseIn(t, leader.p, leader.w).T, e.hb, action
			campaign(leader)
		case "kill":
			faultAt, bound, fault = leader.p.Signal(syscall.SIGKILL), lease+e.hb, action
			leader.px, leader.p = e.spawnVia(t)
			campaign(leader)
		case "pause", "cut":
			if action == "pause" {
				faultAt = leader.p.Signal(syscall.SIGSTOP)
			} else {
				leader.px.Refuse(true)
				leader.px.Cut()
				faultAt = monoNow()
			}
			bound, fault = lease+e.hb, action
			next, ev := elected()
			e.finishStale(t, leader, ev, action, res, campaign)
			faultAt, bound, fault = e.releaseIn(t, next.p, next.w).T, e.hb, "resign"
			campaign(next)
		}
	}
	last, _ := elected()
	for _, c := range cands {
		if c != last {
			c.p.Send("cancel %s", c.w)
			e.c.H.MustWait(t, patience, c.w+" cancelled", isKind(c.w, "acqerr"))
		}
	}
	e.releaseIn(t, last.p, last.w)
	for _, o := range observers {
		e.checkObserved(t, o, epochs)
	}
	report(t, "election: resign, kill, pause, cut off x3", fmt.Sprintf("next leader <= heartbeat %v after a resignation, <= lease %v + heartbeat after the rest", e.hb, lease),
		fmt.Sprintf("worst: resign %v kill %v pause %v cut %v; %d epochs, each seen by the 3 observers in order", ms(worst["resign"]), ms(worst["kill"]), ms(worst["pause"]), ms(worst["cut"]), len(epochs)))
	e.check(CheckOpts{})
	e.settle(name)
}

// nextLeader waits for the next grant among the candidates' campaigns,
// stamped after t.
func (e *env) nextLeader(t testing.TB, cands []*candidate, after int64) (*candidate, Ev) {
	t.Helper()
	ev := e.c.H.MustWait(t, patience, "the next leader", func(ev Ev) bool {
		return ev.Kind == "granted" && ev.T > after && slices.ContainsFunc(cands, func(c *candidate) bool { return c.w == ev.W })
	})
	for _, c := range cands {
		if c.w == ev.W {
			return c, ev
		}
	}
	return nil, ev
}

// finishStale ends a paused or cut-off leader's turn once the next one
// was elected (elected): a cut-off one knew it lost before that; either's
// fenced write is rejected; then it campaigns again.
func (e *env) finishStale(t testing.TB, c *candidate, elected Ev, how, res string, campaign func(*candidate)) {
	t.Helper()
	if how == "pause" {
		c.p.Signal(syscall.SIGCONT)
	} else {
		// Its lease ends a margin (a tenth of the lease TTL) before Redis
		// could elect the next; its event is stamped when its process next
		// runs, which a loaded machine can delay past that margin: slack.
		lost := e.c.H.MustWait(t, patience, c.w+" lost", isKind(c.w, "lost"))
		if lost.T > elected.T+int64(slack) {
			t.Errorf("the cut-off leader learned of its loss %v after the next leader was elected; allowance %v", dur(lost.T-elected.T), slack)
		}
		c.px.Refuse(false)
	}
	e.c.H.MustWait(t, patience, c.w+" lost", isKind(c.w, "lost"))
	sent := monoNow()
	c.p.Send("write %s %s", c.w, res)
	if ev := e.c.H.MustWait(t, patience, "stale write", isKindAfter(c.w, "write", sent)); ev.Err != "rejected" {
		t.Errorf("the %s leader's fenced write after the next one's: %s, want rejected", how, ev.Err)
	}
	campaign(c)
}

// checkObserved checks that observer o saw each of epochs, and nothing out
// of order.
func (e *env) checkObserved(t testing.TB, o *Proc, epochs []int64) {
	t.Helper()
	e.c.H.MustWait(t, e.hb+slack, o.ID+" saw the last leader", func(ev Ev) bool {
		return ev.Proc == o.ID && ev.Kind == "leader" && ev.Fence == epochs[len(epochs)-1]
	})
	var seen []int64
	var last Ev
	for _, ev := range e.c.H.Events() {
		if ev.Proc != o.ID || ev.Kind != "leader" {
			continue
		}
		if ev.Fence < last.Fence || ev.Fence == last.Fence && ev.N <= last.N {
			t.Errorf("observer %s saw epoch %d revision %d after epoch %d revision %d", o.ID, ev.Fence, ev.N, last.Fence, last.N)
		}
		last = ev
		seen = append(seen, ev.Fence)
	}
	for _, ep := range epochs {
		if !slices.Contains(seen, ep) {
			t.Errorf("observer %s missed epoch %d; it saw %v", o.ID, ep, seen)
		}
	}
}
