// Package scripts holds fairlock's Lua scripts. Each script file's header
// says its KEYS, ARGV and reply, and a "-- uses:" line names the helpers of
// lib/ it calls. A script is lib/keys.lua, then those helpers (each after
// the helpers it uses in turn), then its own file: it carries only the Lua
// it runs, since Redis defines every helper anew on each call.
//
// One queue engine (lib/grant.lua, lib/unlock.lua and the scripts) serves
// every kind of lock; what differs is where the holders are kept, behind
// the functions of a holder store (lib/lock/ for the mutex, lib/counted/
// for the semaphore and the read-write lock). Each script that holders
// touch is assembled once per store.
package scripts

import (
	"embed"
	"io/fs"
	"strings"
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

// uses returns the helpers named in src's "-- uses:" line.
func uses(src string) []string {
	for _, line := range strings.Split(src, "\n") {
		if rest, ok := strings.CutPrefix(line, "-- uses:"); ok {
			return strings.Fields(rest)
		}
	}
	return nil
}

// load assembles the script in file name on the holder store in lib/store/
// (lib/lock/ for a mutex, lib/counted/ for a semaphore or read-write lock):
// a helper is that store's file of its name if there is one ("store",
// "leases"), else lib/'s.
func load(name, store string) string {
	body := read(name)
	var parts []string
	seen := map[string]bool{}
	var add func(helper string)
	add = func(helper string) {
		path := "lib/" + store + "/" + helper + ".lua"
		if _, err := fs.Stat(files, path); err != nil {
			path = "lib/" + helper + ".lua"
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
	for _, helper := range uses(body) {
		add(helper)
	}
	return strings.Join(append(parts, body), "\n")
}

// The holder stores, directories of lib/.
const (
	lockStore    = "lock"
	countedStore = "counted"
)

// The mutex's scripts, ready for EVAL.
var (
	Acquire   = load("acquire.lua", lockStore)
	Release   = load("release.lua", lockStore)
	Cancel    = load("cancel.lua", lockStore)
	Extend    = load("extend.lua", lockStore)
	Heartbeat = load("heartbeat.lua", lockStore)
	Inspect   = load("inspect.lua", lockStore)
	Seed      = load("seed.lua", lockStore)

	// Operators' scripts: read a whole queue, end a lease.
	Queue        = load("queue.lua", lockStore)
	ForceRelease = load("force_release.lua", lockStore)
)

// The same engine on the holder store of a semaphore and a read-write lock.
var (
	CountedAcquire   = load("acquire.lua", countedStore)
	CountedRelease   = load("release.lua", countedStore)
	CountedCancel    = load("cancel.lua", countedStore)
	CountedExtend    = load("extend.lua", countedStore)
	CountedHeartbeat = load("heartbeat.lua", countedStore)
	Census           = load("census.lua", countedStore)
)
