//go:build !fairlock

package main

import (
	"errors"
)

// fairlockBuilt: this binary runs the peers alone.
const fairlockBuilt = false

var errNotBuilt = errors.New("fairlock not built into this binary")

func fairlockSharedPeer() peer {
	return peer{
		Name:     "fairlock-shared",
		Settings: "not built",
		Redis:    true,
		New: func(e *env, c *counters) (worker, error) {
			return nil, errNotBuilt
		},
	}
}

func fairlockPeer() peer {
	return peer{
		Name:     "fairlock",
		Settings: "not built",
		Redis:    true,
		New: func(e *env, c *counters) (worker, error) {
			return nil, errNotBuilt
		},
		Kinds: func(e *env, c *counters) (kindWorker, error) {
			return nil, errNotBuilt
		},
	}
}
