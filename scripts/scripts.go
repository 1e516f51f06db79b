// Package scripts holds fairlock's Lua scripts. Each script file's header
// says its KEYS, ARGV and reply. A script is lib/keys.lua, then the
// definitions of lib/ that its body reaches, by the calls it makes and
// those of what it calls, then its own file: it carries only the Lua it
// runs, since Redis defines every function of a script anew on each call.
// Modules talk to each other through their functions only. A few scripts
// stand alone, with their own keys and none of lib/keys.lua: for the calls
// that run most often, release_fast.lua and acquire_fast.lua, the
// mutex's uncontended release and acquire, and renew.lua, a session's
// renewal; and an election's proclaim.lua and leader.lua, on its lock's
// key and its own.
//
// One queue engine (lib/grant.lua, lib/unlock.lua, lib/maintain.lua and
// the scripts) serves every kind of lock; what differs is where the holders
// are kept and how waiters line up, behind the functions of a holder store
// and a queue: lib/lock/ for the mutex, lib/counted/ for the semaphore and
// the read-write lock. Each script is assembled once per store.
//
// The scripts are assembled at init, and each is also checked in, byte for
// byte the text sent to Redis, under gen/: gen/<store>/<file>.lua for
// those of a store (gen/lock/acquire.lua, gen/counted/acquire.lua),
// gen/<file>.lua for those that stand alone (gen/renew.lua). A Redis
// error's "user_script:N" is line N of that file. After a change to a
// script or to lib/, run
//
//	go generate ./scripts/
//
// which writes them anew: TestGenerated fails while one differs from what
// the code assembles.
package scripts

//go:generate go test -run TestGenerated -update .

import (
	"embed"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Constants that the Go code and the Lua share, written once here: the
// scripts get them in place of their names.
const (
	// FenceTTLMs is how long a fence counter lives after its last grant;
	// fences are drawn at least at the server's time in µs
	// (lib/fence.lua), so they still grow when it is made anew.
	FenceTTLMs = 86_400_000
	// Batch is the most tokens one script call or Redis command takes, so
	// that no call holds Redis for long (and below Lua's unpack limit).
	Batch = 1000
	// ScanWaiters is the most waiters one scan for dead ones looks at, a
	// heartbeat: a longer queue is scanned over several. A dead waiter is
	// passed over at the head at once whatever the scan; the scan only
	// keeps places and counts right. At 10,000 a scan cost Redis 6 ms of
	// Lua a heartbeat for 10,000 idle waiters, most of their cost.
	ScanWaiters = Batch
	// IdleGroups is how many debts of groups that left a grouped
	// semaphore it keeps (lib/counted/queue.lua): a group that comes back
	// finds its own, past that only the IdleGroups largest.
	IdleGroups = Batch
	// DefaultAgingMs is the aging of a waiter whose token names none
	// (lib/lanes.lua): fairlock.DefaultPriorityAging.
	DefaultAgingMs = 30_000
)

// The error replies of the scripts, each the start of the message that
// Redis returns: the Go code matches them with redis.HasErrorPrefix.
const (
	// ErrSessionGone: the caller's session is gone (acquire, recover).
	ErrSessionGone = "FAIRLOCK_SESSION"
	// ErrWithdrawn: the caller withdrew the token already (acquire).
	ErrWithdrawn = "FAIRLOCK_WITHDRAWN"
	// ErrWaitersFirst: the fast path's token holds a lock whose queue has
	// waiters (recover).
	ErrWaitersFirst = "FAIRLOCK_QUEUED"
	// ErrCapacity: the semaphore is in use with another capacity or group
	// limit, which follow it (acquire).
	ErrCapacity = "FAIRLOCK_CAPACITY"
)

// WaitersKeySuffix ends a session's waiters' key, after its holders' key
// (scripts/lib/tokens.lua).
const WaitersKeySuffix = ":w"

var constants = strings.NewReplacer(
	"ERR_SESSION_GONE", ErrSessionGone,
	"ERR_WITHDRAWN", ErrWithdrawn,
	"ERR_WAITERS_FIRST", ErrWaitersFirst,
	"ERR_CAPACITY", ErrCapacity,
	"WAITERS_KEY_SUFFIX", WaitersKeySuffix,
	"FENCE_TTL_MS", strconv.Itoa(FenceTTLMs),
	"SCAN_WAITERS", strconv.Itoa(ScanWaiters),
	"BATCH", strconv.Itoa(Batch),
	"DEFAULT_AGING_MS", strconv.Itoa(DefaultAgingMs),
	"IDLE_GROUPS", strconv.Itoa(IdleGroups),
)

//go:embed *.lua lib/*.lua lib/*/*.lua
var files embed.FS

func read(name string) string {
	b, err := files.ReadFile(name)
	if err != nil {
		panic(err) // embedded at build time: cannot happen
	}
	return string(b)
}

// moduleOrder lists lib's modules so that each comes after the modules it
// calls: a script carries the definitions it reaches in this order, and
// Lua finds each local before its use. A store has its own "state",
// "queue" and "store" (lib/lock/, lib/counted/), and may have its own of
// any module.
var moduleOrder = []string{"clock", "keep", "tokens", "fence", "lanes", "fifo", "state", "queue", "store", "grant", "unlock", "maintain"}

// A definition is one top-level definition of a module: a local function,
// or local variables, with the comment above it.
type definition struct {
	names []string        // what it defines
	uses  map[string]bool // the names it mentions
	text  string
}

var (
	luaName      = regexp.MustCompile(`\.\.|[.:]\s*[A-Za-z_]\w*|[A-Za-z_]\w*`)
	luaFunction  = regexp.MustCompile(`^local function ([A-Za-z_]\w*)`)
	luaVariables = regexp.MustCompile(`^local ([A-Za-z_][\w, ]*?)\s*(=|$)`)
	luaLiteral   = regexp.MustCompile(`--[^\n]*|'[^'\n]*'|"[^"\n]*"`)
)

// definitions splits a module into its top-level definitions, which start
// at column 0: "local function" (ending with an "end" alone on its line,
// or on the same line) or "local a, b" on one line, with or without "=".
// Comment lines go with the definition below them.
func definitions(src string) []definition {
	var defs []definition
	var pending []string
	lines := strings.Split(src, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		var names []string
		body := []string{line}
		if m := luaFunction.FindStringSubmatch(line); m != nil {
			names = []string{m[1]}
			if !strings.HasSuffix(line, " end") {
				for i++; lines[i] != "end"; i++ {
					body = append(body, lines[i])
				}
				body = append(body, "end")
			}
		} else if m := luaVariables.FindStringSubmatch(line); m != nil {
			for _, n := range strings.Split(m[1], ",") {
				names = append(names, strings.TrimSpace(n))
			}
		} else {
			pending = append(pending, line) // a comment or a blank line
			continue
		}
		defs = append(defs, definition{names: names, uses: usesOf(strings.Join(body, "\n")), text: strings.Join(append(pending, body...), "\n")})
		pending = nil
	}
	return defs
}

// usesOf returns the names code mentions, but in comments and strings
// and those after "." or ":": redis.call or t:insert names a field, not a
// local call. luaName matches "..", concatenation, first, so that the name
// after it counts.
func usesOf(code string) map[string]bool {
	uses := map[string]bool{}
	for _, n := range luaName.FindAllString(luaLiteral.ReplaceAllString(code, ""), -1) {
		if n[0] != '.' && n[0] != ':' {
			uses[n] = true
		}
	}
	return uses
}

// ownUses returns the names a script's own code mentions before it defines
// them itself at its top level (a "local" at column 0, as in lib): from
// there the name is the script's, and lib's definition of it would be
// carried for nothing (renew.lua's "local waiting" is not fifo.lua's
// waiting()). The values of "local a = ..." still mention the names before.
func ownUses(body string) map[string]bool {
	uses, own := map[string]bool{}, map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		var defines []string
		if m := luaFunction.FindStringSubmatch(line); m != nil {
			own[m[1]] = true // its body calls itself, if it names itself
		} else if m := luaVariables.FindStringSubmatch(line); m != nil {
			defines = strings.Split(m[1], ",")
			line = line[len(m[0]):]
		}
		for n := range usesOf(line) {
			if !own[n] {
				uses[n] = true
			}
		}
		for _, n := range defines {
			own[strings.TrimSpace(n)] = true
		}
	}
	return uses
}

// module reads store's module of that name: its own file if it has one,
// else lib's, or "" if neither has one (a store's own modules, for a
// script that stands alone).
func module(store, name string) string {
	for _, path := range []string{"lib/" + store + "/" + name + ".lua", "lib/" + name + ".lua"} {
		if _, err := fs.Stat(files, path); err == nil {
			return read(path)
		}
	}
	return ""
}

// load assembles the script in file name (without ".lua") on the store in
// lib/store/: lib/keys.lua, the definitions the script reaches, and its
// own file. A script that stands alone (store "") gets no lib/keys.lua,
// and the definitions of lib/ it reaches must not name lib/keys.lua's.
func load(name, store string) string {
	head := ""
	if store != "" {
		head = read("lib/keys.lua")
	}
	return assemble(name+".lua", store, head)
}

// assemble is head, the definitions of lib/ on store that the script in
// file name reaches, then its own file.
func assemble(name, store, head string) string {
	body := read(name)
	var defs []definition
	for _, m := range moduleOrder {
		defs = append(defs, definitions(module(store, m))...)
	}
	// The names the script's own code mentions, then those of every
	// definition they reach, until no new one is reached.
	needed := ownUses(body)
	reached := make([]bool, len(defs))
	for grew := true; grew; {
		grew = false
		for i, d := range defs {
			if !reached[i] && slices.ContainsFunc(d.names, func(n string) bool { return needed[n] }) {
				reached[i], grew = true, true
				for n := range d.uses {
					needed[n] = true
				}
			}
		}
	}
	var parts []string
	if head != "" {
		parts = append(parts, head)
	}
	for i, d := range defs {
		if reached[i] {
			parts = append(parts, d.text)
		}
	}
	return constants.Replace(strings.Join(append(parts, body), "\n"))
}

// An Engine has a T for each of the queue engine's scripts: a Set has
// their text on one holder store, and a caller may keep in an Engine what
// it runs each with (Map makes it).
type Engine[T any] struct {
	Acquire, Recover, Release, Cancel, Extend, Heartbeat T
	Snapshot, ForceRelease                               T
}

// A Set is the engine's scripts on one holder store, ready for EVAL.
type Set = Engine[string]

// A field is one of an Engine's fields and its script's file, without
// ".lua".
type field[T any] struct {
	file string
	of   *T
}

// byFile pairs each of e's fields with its script's file: the one list of
// the engine's scripts, which loading, All and Map go through.
func (e *Engine[T]) byFile() []field[T] {
	return []field[T]{
		{"acquire", &e.Acquire}, {"recover", &e.Recover}, {"release", &e.Release}, {"cancel", &e.Cancel},
		{"extend", &e.Extend}, {"heartbeat", &e.Heartbeat}, {"snapshot", &e.Snapshot}, {"force_release", &e.ForceRelease},
	}
}

// Map returns the Engine that has f of each of e's scripts.
func Map[T, U any](e Engine[T], f func(T) U) Engine[U] {
	var out Engine[U]
	to := out.byFile()
	for i, from := range e.byFile() {
		*to[i].of = f(*from.of)
	}
	return out
}

var (
	// ReleaseFast is the mutex's uncontended release, AcquireFast its
	// uncontended acquire, and Renew a session's renewal: scripts that
	// stand alone, for the calls that run most often. Proclaim and Leader
	// are an election's (fairlock/election.go), on the keys of its lock
	// and its own. Each of these variables is assembled at init.
	ReleaseFast, AcquireFast, Renew, Proclaim, Leader string
	// Mutex keeps its holder in one string key, its waiters in one line.
	Mutex Set
	// Counted keeps the holders of a semaphore or read-write lock in a
	// sorted set with their permits counted, its waiters in groups.
	Counted Set
)

// alone lists the scripts that stand alone by file, stores the holder
// stores by their directory in lib/: with Engine.byFile, the list of every
// script, which init fills and All reads.
var (
	alone = map[string]*string{"release_fast": &ReleaseFast, "acquire_fast": &AcquireFast, "renew": &Renew,
		"proclaim": &Proclaim, "leader": &Leader}
	stores = map[string]*Set{"lock": &Mutex, "counted": &Counted}
)

func init() {
	for file, src := range alone {
		*src = load(file, "")
	}
	for store, set := range stores {
		for _, f := range set.byFile() {
			*f.of = load(f.file, store)
		}
	}
}

// All lists every script, for tests and gen/: those of a store by store
// and file ("lock/acquire"), those that stand alone by file ("renew").
func All() map[string]string {
	all := map[string]string{}
	for file, src := range alone {
		all[file] = *src
	}
	for store, set := range stores {
		for _, f := range set.byFile() {
			all[store+"/"+f.file] = *f.of
		}
	}
	return all
}
