// Package scripts holds fairlock's Lua scripts. Each script is lib.lua, the
// shared helpers, followed by the script's own file; the header comment of
// each file says its KEYS, ARGV and reply.
package scripts

import (
	"embed"
)

//go:embed *.lua
var files embed.FS

func load(name string) string {
	lib, err := files.ReadFile("lib.lua")
	if err != nil {
		panic(err) // embedded at build time: cannot happen
	}
	body, err := files.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return string(lib) + "\n" + string(body)
}

// The scripts, ready for EVAL.
var (
	Acquire   = load("acquire.lua")
	Release   = load("release.lua")
	Cancel    = load("cancel.lua")
	Extend    = load("extend.lua")
	Heartbeat = load("heartbeat.lua")
	Inspect   = load("inspect.lua")

	// Operators' scripts: read a whole queue, end a lease.
	Queue        = load("queue.lua")
	ForceRelease = load("force_release.lua")
)
