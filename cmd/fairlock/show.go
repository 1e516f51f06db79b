package main

// inspect, list and watch: they only read (Locker.Inspect runs
// EVALSHA_RO, Locker.Locks SCAN), so they run under the README's
// read-only ACL rule.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fairlock/fairlock/fairlock"
	"github.com/fairlock/fairlock/internal/lockjson"
)

// kindOf describes the kind k of a lock Inspect read, which is always one
// of fairlock.Kinds; any other kind shows as "unknown", with no column of
// its own.
func kindOf(k fairlock.LockKind) fairlock.KindInfo {
	info, err := k.Info()
	if err != nil {
		return fairlock.KindInfo{Lock: k}
	}
	return info
}

// counted tells whether the requests of a kind ask for a number of
// permits (a semaphore's): its locks have more than one, not shared.
func counted(kd fairlock.KindInfo) bool { return !kd.Shared && kd.Capacity != 1 }

// kindNames lists the names of the kinds of lock, joined by sep.
func kindNames(sep string) string {
	var names []string
	for _, kd := range fairlock.Kinds() {
		names = append(names, kd.Lock.String())
	}
	return strings.Join(names, sep)
}

// kindFlag is -kind: 0 when not given.
type kindFlag fairlock.LockKind

func (f *kindFlag) String() string {
	if *f == 0 {
		return ""
	}
	return fairlock.LockKind(*f).String()
}

func (f *kindFlag) Set(v string) error {
	for _, kd := range fairlock.Kinds() {
		if v == kd.Lock.String() {
			*f = kindFlag(kd.Lock)
			return nil
		}
	}
	return errors.New("want " + kindNames(", "))
}

func defineKind(fs *flag.FlagSet, what string) *kindFlag {
	k := new(kindFlag)
	fs.Var(k, "kind", what+"; `K` is one of "+kindNames(", "))
	return k
}

// states reads the lock called name of kind only, or of every kind when
// only is 0, in the order of fairlock.Kinds.
func (s *session) states(ctx context.Context, name string, only fairlock.LockKind) ([]fairlock.State, error) {
	l, err := s.locker(ctx)
	if err != nil {
		return nil, err
	}
	var out []fairlock.State
	for _, kd := range fairlock.Kinds() {
		if only != 0 && kd.Lock != only {
			continue
		}
		st, err := l.Inspect(ctx, kd.Lock, name)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// inUse tells whether a lock has holders or waiters.
func inUse(st fairlock.State) bool { return st.Held() || st.Queued > 0 || len(st.Waiters) > 0 }

// shown picks, of the states read, those inspect and watch show: the
// ones in use, or, with -kind, the one read. When no kind is in use it
// returns the mutex's alone, idle, and false.
func shown(states []fairlock.State, only fairlock.LockKind) ([]fairlock.State, bool) {
	if only != 0 {
		return states, true
	}
	var out []fairlock.State
	for _, st := range states {
		if inUse(st) {
			out = append(out, st)
		}
	}
	if len(out) == 0 {
		return states[:1], false
	}
	return out, true
}

// The JSON of inspect -json and list -json: one schema for every kind.
//
//	inspect -json NAME  {"name": NAME, "locks": [LOCK, ...]}
//	list -json          {"locks": [LOCK, ...]}
//
// inspect's locks are the kinds of NAME in use, in the order mutex,
// semaphore, rwmutex, election; with -kind, that kind alone, in use or not; when no
// kind is in use, the mutex alone, idle, for its last fence. list's are
// every lock in use, sorted by name then kind.
//
//	LOCK = {
//	  "name":     string, the lock's name
//	  "kind":     "mutex" | "semaphore" | "rwmutex" | "election"
//	  "capacity": number, 1 for a mutex; a semaphore's capacity in use, 0
//	              while it is idle; 1073741824 (fairlock.MaxCapacity) for
//	              a read-write lock
//	  "in_use":   number, permits held; for a read-write lock, its holders
//	  "fence":    number, the latest fence drawn, 0 if none is known
//	  "queued":   number, every waiter in the queue, including those not
//	              listed (past the first 1000, or dead and not yet removed)
//	  "holders":  [HOLDER, ...], the live holders; [] if none, never null
//	  "waiters":  [WAITER, ...], the live waiters in queue order (at most
//	              1000); [] if none, never null
//	}
//	HOLDER = {
//	  "token":    string, the lease's token (release -token)
//	  "lock":     "mutex" | "semaphore" | "read" | "write" | "election"
//	  "permits":  number, a semaphore holder's permits, else 1
//	  "fence":    number, its grant's fence (a mutex's: the latest)
//	  "ttl_ms":   number, ms until Redis drops it unless its Locker renews it
//	  "metadata": string, its WithMetadata, "" if none
//	  "group":    string, its WithGroup (semaphores), "" if none
//	  "weight":   number, its group's weight (WithGroupWeight), 1 if none
//	  "priority": number, its request's priority (WithPriority), 0 if none
//	  "multi":    string, the MultiMutex request it is a part of, the same
//	              in each of that request's queues; "" for a single request
//	}
//	WAITER = {
//	  "token", "lock", "permits", "metadata", "group", "weight",
//	  "priority", "multi": as a holder's (a waiter ranks one level higher per
//	              aging waited, WithPriorityAging)
//	  "position": number, 1 is next; with groups, its place in arrival
//	              order; with priorities, every waiter of a priority above
//	              0 comes first, in arrival order
//	  "ttl_ms":   number, ms until it loses its place unless its Locker
//	              renews it
//	  "waited_ms": number, ms since it joined the queue, by the server's
//	              clock (fairlock.Waiter.Waited)
//	}
//
// Strings are the stored bytes; bytes that are not UTF-8 show as U+FFFD.
// Fields may be added; none will be removed or change meaning.
type inspectJSON struct {
	Name  string          `json:"name"`
	Locks []lockjson.Lock `json:"locks"`
}

type listJSON struct {
	Locks []lockjson.Lock `json:"locks"`
}

// toJSON is st as inspect -json and list -json print it: every waiter
// listed.
func toJSON(st fairlock.State) lockjson.Lock { return lockjson.Of(st, fairlock.MaxListed) }

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func inspectFlags(fs *flag.FlagSet) func(context.Context, *session, string) error {
	asJSON := fs.Bool("json", false, "print one JSON object, of one schema for every kind")
	only := defineKind(fs, "show that kind only, even if idle")
	return func(ctx context.Context, s *session, name string) error {
		states, err := s.states(ctx, name, fairlock.LockKind(*only))
		if err != nil {
			return err
		}
		show, active := shown(states, fairlock.LockKind(*only))
		if *asJSON {
			out := inspectJSON{Name: name, Locks: []lockjson.Lock{}}
			for _, st := range show {
				out.Locks = append(out.Locks, toJSON(st))
			}
			return writeJSON(s.stdout, out)
		}
		printView(s.stdout, name, show, active)
		return nil
	}
}

// printView prints the locks of one name, or, when none is in use, says
// so.
func printView(w io.Writer, name string, show []fairlock.State, active bool) {
	if !active {
		fmt.Fprintf(w, "%s is not in use: no kind of lock of that name has a holder or a waiter (the mutex's last fence is %d)\n",
			display(name), show[0].Fence)
		return
	}
	for i, st := range show {
		if i > 0 {
			fmt.Fprintln(w)
		}
		printState(w, st)
	}
}

// printState shows one lock: its kind and name, what is in use, then its
// holders and waiters, one a line.
//
//	semaphore jobs
//	  3 of 3 permits in use, last fence 14
//	  holders  2
//	    TOKEN   PERMITS  FENCE  EXPIRES IN  GROUP     METADATA
//	    …
//	  waiters  1
//	    POS  TOKEN   PERMITS  EXPIRES IN  GROUP     METADATA
//	    1    …
func printState(w io.Writer, st fairlock.State) {
	fmt.Fprintf(w, "%s %s\n  %s, last fence %d\n", st.Lock, display(st.Name), summary(st), st.Fence)
	cols := columnsOf(st)
	if len(st.Holders) == 0 {
		fmt.Fprintf(w, "  holders  none\n")
	} else {
		fmt.Fprintf(w, "  holders  %d\n", len(st.Holders))
		holderTable(w, cols, st.Holders, "    ")
	}
	if st.Queued == 0 && len(st.Waiters) == 0 {
		fmt.Fprintf(w, "  waiters  none\n")
		return
	}
	fmt.Fprintf(w, "  waiters  %d\n", max(st.Queued, len(st.Waiters)))
	if len(st.Waiters) > 0 {
		t := newTable(w, "    ")
		t.row(cols.waiterHead()...)
		for _, wt := range st.Waiters {
			t.row(cols.waiter(wt)...)
		}
		t.flush()
	}
	if more := st.Queued - len(st.Waiters); more > 0 {
		fmt.Fprintf(w, "    … and %d more\n", more)
	}
}

// holderTable prints holders as printState does.
func holderTable(w io.Writer, cols columns, holders []fairlock.Holder, indent string) {
	t := newTable(w, indent)
	t.row(cols.holderHead()...)
	for _, h := range holders {
		t.row(cols.holder(h)...)
	}
	t.flush()
}

// summary says what of a lock is in use.
func summary(st fairlock.State) string {
	switch kd := kindOf(st.Lock); {
	case kd.Capacity == 0 && st.Capacity == 0:
		return "idle (the next Acquire sets the capacity)"
	case counted(kd):
		return fmt.Sprintf("%d of %d permits in use", st.InUse, st.Capacity)
	case kd.Shared:
		readers := 0
		for _, h := range st.Holders {
			if !h.Shared {
				return "held by a writer"
			}
			readers++
		}
		switch readers {
		case 0:
			return "free"
		case 1:
			return "held by 1 reader"
		}
		return fmt.Sprintf("held by %d readers", readers)
	}
	if st.Held() {
		return "held"
	}
	return "free"
}

// columns says which columns a lock's holders and waiters show: permits
// for a kind whose requests count them (a semaphore), read or write for a
// kind whose requests may share it (a read-write lock), groups for a kind
// that takes them or wherever one is set, priorities wherever one is
// above 0, the MultiMutex request of each party wherever one is a part of
// one, and each holder's fence where Inspect knows it (a mutex's is
// the latest drawn, at least the holder's: the summary line shows it).
type columns struct {
	kind                                         fairlock.LockKind
	permits, lock, group, priority, multi, fence bool
}

func columnsOf(st fairlock.State) columns {
	kd := kindOf(st.Lock)
	c := columns{kind: st.Lock, permits: counted(kd), lock: kd.Shared, group: kd.Groups, fence: kd.HolderFences}
	for _, h := range st.Holders {
		c.group = c.group || h.Group != ""
		c.priority = c.priority || h.Priority > 0
		c.multi = c.multi || h.Multi != ""
	}
	for _, w := range st.Waiters {
		c.group = c.group || w.Group != ""
		c.priority = c.priority || w.Priority > 0
		c.multi = c.multi || w.Multi != ""
	}
	return c
}

func (c columns) holderHead() []string {
	mid := []string{"EXPIRES IN"}
	if c.fence {
		mid = []string{"FENCE", "EXPIRES IN"}
	}
	return c.cells([]string{"TOKEN"}, "PERMITS", "LOCK", mid, "GROUP", "PRIORITY", "MULTI", "METADATA")
}

func (c columns) holder(h fairlock.Holder) []string {
	mid := []string{ttl(h.TTL)}
	if c.fence {
		mid = []string{strconv.FormatInt(h.Fence, 10), ttl(h.TTL)}
	}
	return c.cells([]string{display(h.Token)}, strconv.Itoa(h.Permits), lockjson.Asked(c.kind, h.Shared), mid, groupCell(h.Group, h.Weight), strconv.Itoa(h.Priority), orDash(display(h.Multi)), metaCell(h.Metadata))
}

func (c columns) waiterHead() []string {
	return c.cells([]string{"POS", "TOKEN"}, "PERMITS", "LOCK", []string{"EXPIRES IN"}, "GROUP", "PRIORITY", "MULTI", "METADATA")
}

func (c columns) waiter(w fairlock.Waiter) []string {
	return c.cells([]string{strconv.Itoa(w.Position), display(w.Token)}, strconv.Itoa(w.Permits), lockjson.Asked(c.kind, w.Shared),
		[]string{ttl(w.TTL)}, groupCell(w.Group, w.Weight), strconv.Itoa(w.Priority), orDash(display(w.Multi)), metaCell(w.Metadata))
}

func (c columns) cells(first []string, permits, lock string, mid []string, group, priority, multi, meta string) []string {
	out := append([]string(nil), first...)
	if c.permits {
		out = append(out, permits)
	}
	if c.lock {
		out = append(out, lock)
	}
	out = append(out, mid...)
	if c.group {
		out = append(out, group)
	}
	if c.priority {
		out = append(out, priority)
	}
	if c.multi {
		out = append(out, multi)
	}
	return append(out, meta)
}

// ttl shows a time left, to the millisecond Redis gives.
func ttl(d time.Duration) string { return d.Round(time.Millisecond).String() }

func orDash(s string) string {
	if s == "" || s == `""` {
		return "-"
	}
	return s
}

// metaCell is metadata in a table: quoted, or "-" when there is none.
func metaCell(meta string) string {
	if meta == "" {
		return "-"
	}
	return strconv.Quote(meta)
}

// A table aligns rows of cells in columns.
type table struct {
	w      io.Writer
	buf    bytes.Buffer
	tw     *tabwriter.Writer
	indent string
}

func newTable(w io.Writer, indent string) *table {
	t := &table{w: w, indent: indent}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 0, 2, ' ', 0)
	return t
}

// row adds a row. Every cell is quoted or has no tab or newline, so none
// can break the table.
func (t *table) row(cells ...string) { fmt.Fprintln(t.tw, strings.Join(cells, "\t")) }

func (t *table) flush() {
	t.tw.Flush()
	for _, line := range strings.SplitAfter(t.buf.String(), "\n") {
		if line != "" {
			fmt.Fprint(t.w, t.indent+strings.TrimRight(line, " \n")+"\n")
		}
	}
}

// quoteMeta shows metadata after a token, always quoted: it is any
// caller's bytes, and must not pass for output of ours on a terminal.
func quoteMeta(meta string) string {
	if meta == "" {
		return ""
	}
	return "  " + strconv.Quote(meta)
}

// display shows a lock name (or a token, or a group) as it is when that is
// unambiguous on a terminal, and quoted when it has spaces or unprintable
// bytes.
func display(name string) string {
	for _, r := range name {
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) || r == '"' {
			return strconv.Quote(name)
		}
	}
	return name
}

func listFlags(fs *flag.FlagSet) func(context.Context, *session, string) error {
	asJSON := fs.Bool("json", false, "print one JSON object: every lock in use, as inspect -json shows it")
	return func(ctx context.Context, s *session, _ string) error {
		l, err := s.locker(ctx)
		if err != nil {
			return err
		}
		locks, err := l.Locks(ctx)
		if err != nil {
			return err
		}
		// One Inspect a lock: an operator's tool may take the round trips.
		states := make([]fairlock.State, 0, len(locks))
		for _, lk := range locks {
			st, err := l.Inspect(ctx, lk.Lock, lk.Name)
			if err != nil {
				return err
			}
			states = append(states, st)
		}
		if *asJSON {
			out := listJSON{Locks: []lockjson.Lock{}}
			for _, st := range states {
				out.Locks = append(out.Locks, toJSON(st))
			}
			return writeJSON(s.stdout, out)
		}
		if len(states) == 0 {
			return nil
		}
		t := newTable(s.stdout, "")
		t.row("KIND", "NAME", "HOLDERS", "WAITERS")
		for _, st := range states {
			t.row(st.Lock.String(), display(st.Name), strconv.Itoa(len(st.Holders)), strconv.Itoa(max(st.Queued, len(st.Waiters))))
		}
		t.flush()
		return nil
	}
}

func watchFlags(fs *flag.FlagSet) func(context.Context, *session, string) error {
	every := fs.Duration("every", time.Second, "how often to read the lock")
	count := fs.Int("count", 0, "stop after this many readings (0: until interrupted)")
	only := defineKind(fs, "watch that kind only, even if idle")
	return func(ctx context.Context, s *session, name string) error {
		if *every <= 0 {
			return fmt.Errorf("%w: -every must be positive", errUsage)
		}
		t := time.NewTicker(*every)
		defer t.Stop()
		var prev []fairlock.State
		for n := 1; ; n++ {
			states, err := s.states(ctx, name, fairlock.LockKind(*only))
			if ctx.Err() != nil {
				return nil // interrupted: the normal end of a watch
			}
			if err != nil {
				return err
			}
			if s.tty {
				fmt.Fprint(s.stdout, "\x1b[H\x1b[2J")
			}
			fmt.Fprintf(s.stdout, "--- %s\n", time.Now().Format("15:04:05.000"))
			show, active := shown(states, fairlock.LockKind(*only))
			printView(s.stdout, name, show, active)
			if prev != nil {
				for i := range states {
					for _, m := range changes(prev[i], states[i]) {
						fmt.Fprintln(s.stdout, m)
					}
				}
			}
			prev = states
			if n == *count {
				return nil
			}
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	}
}

// changes says what happened to a lock between two readings: grants (a
// holder not seen before), ended leases, and new waiters.
func changes(prev, cur fairlock.State) []string {
	var out []string
	held := make(map[string]bool, len(prev.Holders))
	for _, h := range prev.Holders {
		held[h.Token] = true
	}
	now := make(map[string]bool, len(cur.Holders))
	for _, h := range cur.Holders {
		now[h.Token] = true
		if !held[h.Token] {
			out = append(out, fmt.Sprintf("* %s: granted to %s%s, %s%s%s%s%s", cur.Lock, display(h.Token), request(cur.Lock, h.Shared, h.Permits),
				fenceOf(cur.Lock, h.Fence), group(h.Group, h.Weight), priority(h.Priority), partOf(h.Multi), quoteMeta(h.Metadata)))
		}
	}
	for _, h := range prev.Holders {
		if !now[h.Token] {
			out = append(out, fmt.Sprintf("- %s: %s ended (released, expired or forced)%s, %s", prev.Lock, display(h.Token),
				request(prev.Lock, h.Shared, h.Permits), fenceOf(prev.Lock, h.Fence)))
		}
	}
	waited := make(map[string]bool, len(prev.Waiters))
	for _, w := range prev.Waiters {
		waited[w.Token] = true
	}
	for _, w := range cur.Waiters {
		if !waited[w.Token] && !held[w.Token] {
			out = append(out, fmt.Sprintf("+ %s: %s queued at position %d%s%s%s%s%s", cur.Lock, display(w.Token), w.Position,
				request(cur.Lock, w.Shared, w.Permits), group(w.Group, w.Weight), priority(w.Priority), partOf(w.Multi), quoteMeta(w.Metadata)))
		}
	}
	return out
}

// request says what a holder or waiter asks for, after a comma, if the
// kind does not say it all.
func request(k fairlock.LockKind, shared bool, permits int) string {
	switch kd := kindOf(k); {
	case counted(kd) && permits == 1:
		return ", 1 permit"
	case counted(kd):
		return fmt.Sprintf(", %d permits", permits)
	case kd.Shared:
		return ", " + lockjson.Asked(k, shared)
	}
	return ""
}

// fenceOf shows a holder's fence as Inspect gives it: where it does not
// know a holder's own (a mutex), the latest drawn, which the holder's is
// at most.
func fenceOf(k fairlock.LockKind, fence int64) string {
	if !kindOf(k).HolderFences {
		return fmt.Sprintf("fence at most %d", fence)
	}
	return fmt.Sprintf("fence %d", fence)
}

// group names a party's group, after a comma, with its weight if not 1.
func group(g string, weight int) string {
	if g == "" {
		return ""
	}
	return ", group " + groupCell(g, weight)
}

// priority says a party's priority, after a comma, if above 0.
func priority(p int) string {
	if p == 0 {
		return ""
	}
	return fmt.Sprintf(", priority %d", p)
}

// partOf names the MultiMutex request a party is a part of, after a
// comma, if any.
func partOf(multi string) string {
	if multi == "" {
		return ""
	}
	return ", part of " + display(multi)
}

// groupCell is a party's group as a table shows it: "-" for none.
func groupCell(g string, weight int) string {
	if g != "" && weight > 1 {
		return fmt.Sprintf("%s (weight %d)", display(g), weight)
	}
	return orDash(display(g))
}
