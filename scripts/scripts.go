// Package scripts holds fairlock's Lua scripts. Each script file's header
// says its KEYS, ARGV and reply, and a "-- uses:" line names the helpers of
// lib/ it calls. A script is lib/keys.lua, then those helpers (each after
// the helpers it uses in turn), then its own file: it carries only the Lua
// it runs, since Redis defines every helper anew on each call.
package scripts

import (
	"embed"
	"strings"
)

//go:embed *.lua lib/*.lua
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

// load assembles the script in file name.
func load(name string) string {
	body := read(name)
	var parts []string
	seen := map[string]bool{}
	var add func(helper string)
	add = func(helper string) {
		if seen[helper] {
			return
		}
		seen[helper] = true
		src := read("lib/" + helper + ".lua")
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

// The scripts, ready for EVAL.
var (
	Acquire   = load("acquire.lua")
	Release   = load("release.lua")
	Cancel    = load("cancel.lua")
	Extend    = load("extend.lua")
	Heartbeat = load("heartbeat.lua")
	Inspect   = load("inspect.lua")
	Seed      = load("seed.lua")

	// Operators' scripts: read a whole queue, end a lease.
	Queue        = load("queue.lua")
	ForceRelease = load("force_release.lua")
)
