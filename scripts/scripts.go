// Package scripts holds fairlock's Lua scripts. Each script file's header
// says its KEYS, ARGV and reply, and a "-- uses:" line names the modules of
// lib/ it calls. A script is lib/keys.lua, then those modules (each after
// the modules it uses in turn), then its own file: it carries only the Lua
// it runs, since Redis defines every function of a script anew on each
// call. Modules talk to each other through their functions only.
//
// One queue engine (lib/grant.lua, lib/unlock.lua, lib/maintain.lua and
// the scripts) serves every kind of lock; what differs is where the holders
// are kept and how waiters line up, behind the functions of a holder store
// and a queue: lib/lock/ for the mutex, lib/counted/ for the semaphore and
// the read-write lock. Each script is assembled once per store.
package scripts

import (
	"embed"
	"io/fs"
	"strconv"
	"strings"
)

// Constants that the Go code and the Lua share, written once here: the
// scripts get them in place of their names.
const (
	// FenceFloor: a fence counter below it was never seeded from the
	// server's clock (µs since 1970 passed it in 1970).
	FenceFloor = 1_000_000_000_000
	// FenceTTLMs is how long a fence counter lives after it was seeded;
	// then it is seeded anew from the clock, so fences still grow.
	FenceTTLMs = 86_400_000
	// Batch is the most tokens one script call or Redis command takes, so
	// that no call holds Redis for long (and below Lua's unpack limit).
	Batch = 1000
	// ScanWaiters is the most waiters one scan for dead ones looks at.
	ScanWaiters = 10 * Batch
	// servedBase orders a group that was served after every group never
	// served (lib/counted/queue.lua).
	servedBase = 1_000_000_000_000_000
)

var constants = strings.NewReplacer(
	"FENCE_FLOOR", strconv.Itoa(FenceFloor),
	"FENCE_TTL_MS", strconv.Itoa(FenceTTLMs),
	"SCAN_WAITERS", strconv.Itoa(ScanWaiters),
	"SERVED_BASE", strconv.Itoa(servedBase),
	"BATCH", strconv.Itoa(Batch),
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

// uses returns the modules named in src's "-- uses:" line.
func uses(src string) []string {
	for _, line := range strings.Split(src, "\n") {
		if rest, ok := strings.CutPrefix(line, "-- uses:"); ok {
			return strings.Fields(rest)
		}
	}
	return nil
}

// load assembles the script in file name on the store in lib/store/: a
// module is that store's file of its name if there is one ("store",
// "queue"), else lib/'s. A store's quick_<name> file, if there is one,
// comes right after lib/keys.lua, before any module: a path that needs no
// function and returns costs Redis no function definitions.
func load(name, store string) string {
	var parts []string
	seen := map[string]bool{}
	var add func(module string)
	add = func(module string) {
		path := "lib/" + store + "/" + module + ".lua"
		if _, err := fs.Stat(files, path); err != nil {
			path = "lib/" + module + ".lua"
		}
		if seen[path] {
			return
		}
		seen[path] = true
		src := read(path)
		for _, dep := range uses(src) {
			add(dep)
		}
		parts = append(parts, src)
	}
	add("keys")
	if quick, err := files.ReadFile("lib/" + store + "/quick_" + name); err == nil {
		parts = append(parts, string(quick))
	}
	body := read(name)
	for _, module := range uses(body) {
		add(module)
	}
	return constants.Replace(strings.Join(append(parts, body), "\n"))
}

// A Set is the engine's scripts on one holder store, ready for EVAL.
type Set struct {
	Acquire, Recover, Release, Cancel, Extend, Heartbeat string
	Snapshot, ForceRelease, Seed                         string
}

func loadSet(store string) Set {
	return Set{
		Acquire:      load("acquire.lua", store),
		Recover:      load("recover.lua", store),
		Release:      load("release.lua", store),
		Cancel:       load("cancel.lua", store),
		Extend:       load("extend.lua", store),
		Heartbeat:    load("heartbeat.lua", store),
		Snapshot:     load("snapshot.lua", store),
		ForceRelease: load("force_release.lua", store),
		Seed:         load("seed.lua", store),
	}
}

var (
	// Mutex keeps its holder in one string key, its waiters in one line.
	Mutex = loadSet("lock")
	// Counted keeps the holders of a semaphore or read-write lock in a
	// sorted set with their permits counted, its waiters in groups.
	Counted = loadSet("counted")
)

// All lists every script, by store and file, for tests.
func All() map[string]string {
	all := map[string]string{}
	for store, set := range map[string]Set{"lock": Mutex, "counted": Counted} {
		for file, src := range map[string]string{
			"acquire": set.Acquire, "recover": set.Recover, "release": set.Release, "cancel": set.Cancel, "extend": set.Extend,
			"heartbeat": set.Heartbeat, "snapshot": set.Snapshot, "force_release": set.ForceRelease, "seed": set.Seed,
		} {
			all[store+"/"+file] = src
		}
	}
	return all
}
