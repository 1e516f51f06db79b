//go:build !fairlock

package main

import (
	"errors"
)

func fairlockPeer() peer {
	return peer{
		Name:     "fairlock",
		Settings: "not built",
		Redis:    true,
		New: func(e *env, c *counters) (worker, error) {
			return nil, errors.New("fairlock not built into this binary")
		},
	}
}
