package fairlock

// TestRuleMatchesTheModel drives the semaphore's scripts (the counted
// store, with groups, weights, limits and priority lanes) and
// internal/model, the same rule written in plain Go, with the same random
// sequences of requests, tries, releases, cancellations, crashes,
// heartbeats and steps of the clock, and after every step compares what
// each holds: the holders and their fences and grant records, the
// waiters and their arrivals, every line, each lane's groups set, clock
// and heads, each group's fields, and the idle debts. It runs on miniredis,
// whose clock the test sets, so that both sides see the same time; the
// scripts are the ones Redis runs. Inside the model, before every grant,
// it checks the aging bound: once a waiter has reached level 9, nobody is
// granted from a lane whose waiters all came after it, while its own lane
// has a head to grant.
//
// The default budget fits CI; the long run:
//
//	go test -run TestRuleMatchesTheModel ./fairlock/ -rapid.checks=2000 -rapid.steps=100

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/fairlock/fairlock/internal/model"
	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"
)

var ruleGroups = []string{"", "a", "b", "c"}

// A ruleWorld is one sequence: a semaphore on miniredis and its model.
type ruleWorld struct {
	t        *rapid.T
	m        *miniredis.Miniredis
	c        *redis.Client
	ref      *lockRef
	base     string // the semaphore's keys start with it
	model    *model.Lock
	now      int64 // µs
	scanMs   int64
	sessions []string // the live session of each Locker
	epochs   []int
	agings   []int64 // each Locker's aging, ms
	requests map[string]model.Request
	seq      int
	steps    *int
	seen     map[string]int // the states the steps reached, for the log
}

const ruleGrantMs = 1_000_000_000 // a grant's record: longer than any sequence

func newRuleWorld(rt *rapid.T, m *miniredis.Miniredis, c *redis.Client, steps *int, seen map[string]int) *ruleWorld {
	m.FlushAll()
	cfg := defaultConfig()
	cfg.leaseTTL, cfg.waiterTTL = 3*time.Second, 3*time.Second // a scan each 750 ms
	refs := newRefCache(&cfg, "rule", false)
	capacity := rapid.IntRange(1, 4).Draw(rt, "capacity")
	limit := rapid.IntRange(0, capacity).Draw(rt, "limit")
	w := &ruleWorld{t: rt, m: m, c: c, ref: refs.get(semaphoreKind, "rule"), model: model.New(capacity, limit),
		now: 1_800_000_000_000_000, scanMs: cfg.heartbeat().Milliseconds(), requests: map[string]model.Request{}, steps: steps, seen: seen}
	w.base = strings.TrimSuffix(w.ref.keys[0], "holders")
	w.model.GrantTTLMs = ruleGrantMs
	oneAging := rapid.Bool().Draw(rt, "one aging")
	agings := []int64{50, 400, 30_000}
	for i := range 3 {
		aging := agings[0]
		if !oneAging {
			aging = rapid.SampledFrom(agings).Draw(rt, fmt.Sprintf("aging%d", i))
		}
		w.agings = append(w.agings, aging)
		w.epochs = append(w.epochs, 0)
		w.sessions = append(w.sessions, "")
		w.openSession(i)
	}
	if oneAging {
		w.model.Check = w.checkAging
	}
	w.setClock()
	return w
}

func (w *ruleWorld) setClock() {
	w.m.SetTime(time.UnixMicro(w.now))
	w.model.SetClock(w.now)
}

// openSession starts Locker i's next session, which lives as long as the
// test.
func (w *ruleWorld) openSession(i int) {
	w.epochs[i]++
	id := fmt.Sprintf("L%d.%d", i, w.epochs[i])
	w.sessions[i] = id
	ctx := context.Background()
	key := w.ref.sessions + id
	w.c.HSet(ctx, key, "", 1)
	w.c.PExpire(ctx, key, time.Hour)
	w.c.Set(ctx, key+":w", ruleGrantMs, time.Hour)
}

// request draws what an Acquire of Locker i asks for, and its token.
func (w *ruleWorld) request(i int) model.Request {
	rt := w.t
	w.seq++
	r := model.Request{Session: w.sessions[i], AgingMs: w.agings[i], Weight: 1,
		Lane:    rapid.SampledFrom([]int{0, 0, 0, 4, 9}).Draw(rt, "lane"),
		Group:   rapid.SampledFrom(ruleGroups).Draw(rt, "group"),
		Permits: rapid.IntRange(1, max(1, min(w.model.Capacity, cmpOr(w.model.Limit, w.model.Capacity)))).Draw(rt, "permits")}
	if r.Group != "" {
		r.Weight = rapid.SampledFrom([]int{1, 1, 3, 10}).Draw(rt, "weight")
	}
	r.Token = r.Session + ":" + strconv.Itoa(w.seq)
	if r.Lane > 0 || r.AgingMs != model.DefaultAgingMs {
		r.Token += "!" + strconv.Itoa(r.Lane) + "/" + strconv.FormatInt(r.AgingMs, 10)
	}
	if r.Permits > 1 {
		r.Token += "#" + strconv.Itoa(r.Permits)
	}
	w.requests[r.Token] = r
	return r
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

func (w *ruleWorld) run(s *luaScript, argv ...any) *redis.Cmd {
	return s.run(context.Background(), w.c, w.ref.call(argv...), retried)
}

func (w *ruleWorld) Acquire(rt *rapid.T) { w.acquire(rt, true) }

func (w *ruleWorld) TryAcquire(rt *rapid.T) { w.acquire(rt, false) }

func (w *ruleWorld) acquire(rt *rapid.T, wait bool) {
	r := w.request(rapid.IntRange(0, 2).Draw(rt, "locker"))
	mode := modeTry
	if wait {
		mode = modeWait
	}
	reply, err := w.run(w.ref.kind.scripts.Acquire, r.Token, mode, noArg, int64(w.model.Capacity), int64(w.model.Limit), r.Group, int64(r.Weight)).Int64()
	if err != nil {
		rt.Fatalf("acquire %s: %v", r.Token, err)
	}
	fence, _, merr := w.model.Acquire(r, wait, w.scanMs)
	if merr != nil {
		rt.Fatalf("model acquire %s: %v", r.Token, merr)
	}
	if got := max(reply, 0); got != fence {
		rt.Fatalf("acquire %s (wait %v): Redis answered %d, the model %d", r.Token, wait, reply, fence)
	}
}

// pick draws one of tokens, or skips the step.
func pick(rt *rapid.T, tokens []string, what string) string {
	if len(tokens) == 0 {
		rt.Skip("no " + what)
	}
	slices.Sort(tokens)
	return rapid.SampledFrom(tokens).Draw(rt, what)
}

func (w *ruleWorld) Release(rt *rapid.T) {
	token := pick(rt, slices.Collect(maps.Keys(w.model.View().Holders)), "holder")
	n, err := w.run(w.ref.kind.scripts.Release, token, noArg, noArg).Int()
	if err != nil {
		rt.Fatalf("release %s: %v", token, err)
	}
	released, _ := w.model.Release(token)
	if (n == 1) != released {
		rt.Fatalf("release %s: Redis answered %d, the model %v", token, n, released)
	}
}

func (w *ruleWorld) Cancel(rt *rapid.T) {
	var tokens []string
	for _, x := range w.model.View().Waiters {
		tokens = append(tokens, x.Token)
	}
	token := pick(rt, tokens, "waiter")
	n, err := w.run(w.ref.kind.scripts.Cancel, token, noArg, noArg).Int()
	if err != nil {
		rt.Fatalf("cancel %s: %v", token, err)
	}
	if released, _ := w.model.Cancel(token); (n == 1) != released {
		rt.Fatalf("cancel %s: Redis answered %d, the model %v", token, n, released)
	}
}

// Crash ends a Locker's session (its keys gone, as when it stops
// renewing), and starts its next.
func (w *ruleWorld) Crash(rt *rapid.T) {
	i := rapid.IntRange(0, 2).Draw(rt, "locker")
	key := w.ref.sessions + w.sessions[i]
	w.c.Del(context.Background(), key, key+":w")
	w.model.Kill(w.sessions[i])
	w.openSession(i)
}

func (w *ruleWorld) Heartbeat(rt *rapid.T) {
	if err := w.run(w.ref.kind.scripts.Heartbeat, int64(w.model.Capacity), int64(w.model.Limit), noArg, noArg).Err(); err != nil {
		rt.Fatalf("heartbeat: %v", err)
	}
	w.model.Heartbeat(w.scanMs)
}

// Clock moves the server's clock, now and then back a little, as a
// clock set back does.
func (w *ruleWorld) Clock(rt *rapid.T) {
	w.now += rapid.Int64Range(-2_000, 600_000).Draw(rt, "µs")
	w.setClock()
}

// checkAging is the model's bound, checked before each grant: a waiter
// that reached level 9, whose lane has a head to grant, is passed only by
// a lane that has a waiter as old.
func (w *ruleWorld) checkAging(granted model.Request) {
	v := w.model.View()
	oldest := map[int]int64{}
	for _, x := range v.Waiters {
		if at, ok := oldest[x.Lane]; !ok || x.Arrival < at {
			oldest[x.Lane] = x.Arrival
		}
	}
	for _, x := range v.Waiters {
		if w.model.Level(x) < 9 || !w.grantable(v, x.Lane) {
			continue
		}
		if oldest[granted.Lane] > x.Arrival {
			w.t.Fatalf("%s of lane %d granted while %s of lane %d, at level 9 since %v, waited: no waiter of lane %d came before it",
				granted.Token, granted.Lane, x.Token, x.Lane, time.Duration(w.model.Now()-x.Arrival-int64(9-x.Lane)*x.AgingMs*1000)*time.Microsecond, granted.Lane)
		}
	}
}

// grantable tells whether lane has a head the grant loop may choose: a
// line whose group its limit lets in.
func (w *ruleWorld) grantable(v model.View, lane int) bool {
	seen := map[string]bool{}
	for _, x := range v.Waiters {
		if x.Lane != lane || seen[x.Group] {
			continue
		}
		seen[x.Group] = true
		held := 0
		if g, ok := v.Groups[x.Group]; ok {
			held = g.Held
		} else if v.Grouped == 0 {
			for token := range v.Holders {
				held += w.requests[token].Permits
			}
		}
		if w.model.Limit == 0 || held+x.Permits <= w.model.Limit {
			return true
		}
	}
	return false
}

func (w *ruleWorld) Check(rt *rapid.T) {
	*w.steps++
	want := w.model.View()
	got := w.redisView(rt)
	// Waiters of different lanes may share an arrival (each lane's line
	// keeps its own order): compare them in one order.
	for _, ws := range [][]model.Waiting{got.Waiters, want.Waiters} {
		slices.SortStableFunc(ws, func(a, b model.Waiting) int {
			return cmp.Or(cmp.Compare(a.Arrival, b.Arrival), strings.Compare(a.Token, b.Token))
		})
	}
	if !reflect.DeepEqual(got, want) {
		rt.Fatalf("at %d µs, Redis and the model differ:\n%s", w.now, viewDiff(got, want))
	}
	w.checkLines(rt, want)
	w.note(want)
}

// note counts the states a step reached.
func (w *ruleWorld) note(v model.View) {
	lanes := map[int]bool{}
	for _, x := range v.Waiters {
		lanes[x.Lane] = true
		if w.model.Level(x) == 9 && x.Lane < 9 {
			w.seen["a waiter aged to level 9"]++
		}
	}
	if len(lanes) > 1 {
		w.seen["waiters in several lanes"]++
	}
	if v.Grouped > 0 {
		w.seen["grouped"]++
		if len(lanes) > 1 {
			w.seen["grouped, in several lanes"]++
		}
	}
	if len(v.Idle) > 0 {
		w.seen["idle debts kept"]++
	}
	for _, g := range v.Groups {
		if len(g.Clocks) > 0 && len(g.Members) < len(g.Clocks) && g.Held > 0 {
			w.seen["a group holding, out of a lane's set"]++
			break
		}
	}
	for _, h := range v.Holders {
		if h.Charged > 1 {
			w.seen["a hold charged beyond its estimate"]++
			break
		}
	}
}

// hash, list and zset read a key of miniredis's directly, in this
// process: a missing key is empty.
func (w *ruleWorld) hash(key string) map[string]string {
	fields, _ := w.m.HKeys(key)
	out := map[string]string{}
	for _, f := range fields {
		out[f] = w.m.HGet(key, f)
	}
	return out
}

func (w *ruleWorld) list(key string) []string {
	l, _ := w.m.List(key)
	return l
}

// zset returns a sorted set's members in order, and their scores.
func (w *ruleWorld) zset(key string) ([]string, map[string]int64) {
	members, _ := w.m.ZMembers(key)
	scores, _ := w.m.SortedSet(key)
	out := map[string]int64{}
	for m, sc := range scores {
		out[m] = int64(sc)
	}
	return members, out
}

// redisView reads the semaphore's keys into a model.View.
func (w *ruleWorld) redisView(rt *rapid.T) model.View {
	state := w.hash(w.base + "state")
	v := model.View{Holders: map[string]model.Held{}, Groups: map[string]model.GroupView{}, Idle: map[string]int64{}}
	num := func(s string) int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			rt.Fatalf("state field %q is not a whole number", s)
		}
		return n
	}
	holders, _ := w.zset(w.base + "holders")
	for _, token := range holders {
		h := model.Held{Fence: num(state[token])}
		if rec, ok := state["t:"+token]; ok {
			since, charged, _ := strings.Cut(rec, " ")
			h.Record, h.Since, h.Charged = true, num(since), num(charged)
		}
		v.Holders[token] = h
	}
	order, scores := w.zset(w.base + "order")
	for _, token := range order {
		at := scores[token]
		if at < 0 {
			at += 1 << 52
		}
		v.Waiters = append(v.Waiters, model.Waiting{Request: w.requests[token], Arrival: at, Group: state["g:"+token]})
	}
	if s, ok := state["grouped"]; ok {
		v.Grouped = int(num(s))
	}
	if s, ok := state["mean"]; ok {
		v.Mean = ptrTo(num(s))
	}
	for lane := range 10 {
		if s, ok := state[ruleLaneField("vnow", "", lane)]; ok {
			v.LaneClocks[lane] = num(s)
		}
	}
	group := func(name string) model.GroupView {
		if g, ok := v.Groups[name]; ok {
			return g
		}
		return model.GroupView{Weight: 1, Lanes: []int{0}, Clocks: map[int]int64{}, Members: map[int]string{}}
	}
	for f, val := range state {
		kind, name, ok := strings.Cut(f, ":")
		if !ok || kind == "t" || kind == "g" {
			continue
		}
		if _, isToken := w.requests[f]; isToken {
			continue
		}
		g := group(name)
		switch {
		case kind == "h":
			g.Held = int(num(val))
		case kind == "e":
			g.Mean = ptrTo(num(val))
		case kind == "w":
			g.Weight = int(num(val))
		case kind == "l":
			for _, d := range val {
				g.Lanes = append(g.Lanes, int(d-'0'))
			}
		case kind[0] == 'v':
			g.Clocks[laneOfField(kind)] = num(val)
		case kind[0] == 'm':
			g.Members[laneOfField(kind)] = val
		default:
			rt.Fatalf("state field %q of no known kind", f)
		}
		v.Groups[name] = g
	}
	_, v.Idle = w.zset(w.base + "idle")
	if v.Grouped == 0 {
		v.Groups = map[string]model.GroupView{}
	}
	w.checkSets(rt, v)
	return v
}

func ptrTo(n int64) *int64 { return &n }

// laneOfField is the lane a field's kind names: "v" 0, "v4" 4.
func laneOfField(kind string) int {
	if len(kind) == 1 {
		return 0
	}
	return int(kind[1] - '0')
}

func ruleLaneField(kind, group string, lane int) string {
	if lane == 0 {
		return kind
	}
	return kind + strconv.Itoa(lane)
}

// checkSets checks each lane's groups set against the groups' members and
// clocks, and each heads set against the heads of the groups' lines.
func (w *ruleWorld) checkSets(rt *rapid.T, v model.View) {
	for lane := range 10 {
		key := w.base + "groups"
		if lane > 0 {
			key += ":" + strconv.Itoa(lane)
		}
		_, got := w.zset(key)
		want := map[string]int64{}
		for _, g := range v.Groups {
			if m, ok := g.Members[lane]; ok {
				want[m] = g.Clocks[lane]
			}
		}
		if !reflect.DeepEqual(got, want) {
			rt.Fatalf("lane %d's groups set %v, its groups' members and clocks %v", lane, got, want)
		}
		if lane == 0 || v.Grouped == 0 {
			continue
		}
		_, heads := w.zset(w.base + "heads:" + strconv.Itoa(lane))
		wantHeads := map[string]int64{}
		for _, x := range v.Waiters {
			if _, ok := wantHeads[x.Group]; !ok && x.Lane == lane {
				wantHeads[x.Group] = x.Arrival
			}
		}
		if !reflect.DeepEqual(heads, wantHeads) {
			rt.Fatalf("lane %d's heads set %v, its lines' heads %v", lane, heads, wantHeads)
		}
	}
}

// checkLines checks every line against the model's waiters.
func (w *ruleWorld) checkLines(rt *rapid.T, v model.View) {
	for _, g := range ruleGroups {
		for lane := range 10 {
			var key string
			switch {
			case g == "" && lane == 0:
				key = w.base + "queue"
			case g == "":
				key = w.base + "queue:" + strconv.Itoa(lane)
			case lane == 0:
				key = w.base + "gq:" + g
			default:
				key = w.base + "gq" + strconv.Itoa(lane) + ":" + g
			}
			got := w.list(key)
			var want []string
			for _, x := range v.Waiters {
				if x.Lane == lane && x.Group == g {
					want = append(want, x.Token)
				}
			}
			if !slices.Equal(got, want) {
				rt.Fatalf("line %s holds %v, the model %v", key, got, want)
			}
		}
	}
}

// viewDiff says where two views differ.
func viewDiff(got, want model.View) string {
	var b strings.Builder
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range gv.NumField() {
		if g, w := gv.Field(i).Interface(), wv.Field(i).Interface(); !reflect.DeepEqual(g, w) {
			fmt.Fprintf(&b, "%s:\n  Redis %s\n  model %s\n", gv.Type().Field(i).Name, show(g), show(w))
		}
	}
	return b.String()
}

func show(x any) string {
	switch v := x.(type) {
	case *int64:
		if v == nil {
			return "nil"
		}
		return strconv.FormatInt(*v, 10)
	case map[string]model.GroupView:
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(v)) {
			g := v[k]
			mean := "nil"
			if g.Mean != nil {
				mean = strconv.FormatInt(*g.Mean, 10)
			}
			parts = append(parts, fmt.Sprintf("%q{held %d mean %s weight %d lanes %v clocks %v members %v}", k, g.Held, mean, g.Weight, g.Lanes, g.Clocks, g.Members))
		}
		return strings.Join(parts, " ")
	}
	return fmt.Sprintf("%+v", x)
}

func TestRuleMatchesTheModel(t *testing.T) {
	t.Parallel()
	m := miniredis.RunT(t)
	// Every script runs once, as the model's step does: a call go-redis
	// timed out and sent again on a loaded machine ran twice (an arrival
	// number drawn twice, CI saw), which is not the rule's to answer.
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	t.Cleanup(func() { c.Close() })
	steps, sequences, seen := 0, 0, map[string]int{}
	// At least 100 sequences, whatever -rapid.checks (the state machine's
	// budget, TestMain's) asks of each rapid.Check: one takes a second or two
	// on miniredis.
	for sequences < 100 && !t.Failed() {
		rapid.Check(t, func(rt *rapid.T) {
			sequences++
			w := newRuleWorld(rt, m, c, &steps, seen)
			rt.Repeat(map[string]func(*rapid.T){
				"Acquire": w.Acquire, "Acquire2": w.Acquire, "Acquire3": w.Acquire, "TryAcquire": w.TryAcquire,
				"Release": w.Release, "Release2": w.Release, "Cancel": w.Cancel, "Crash": w.Crash,
				"Heartbeat": w.Heartbeat, "Clock": w.Clock, "Clock2": w.Clock, "": w.Check,
			})
		})
	}
	t.Logf("%d steps in %d sequences: Redis and the model agreed after each; steps that reached %v", steps, sequences, seen)
}
