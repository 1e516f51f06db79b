package main

import (
	"testing"

	"github.com/fairlock/fairlock/examples/internal/exampletest"
)

// readmostly fails by itself when fairlock's writer misses an update, when a
// reader is never served, or when a reader sees a config half written.
func TestReadMostly(t *testing.T) {
	out := exampletest.Run(t, readmostly, "fairlock   3 of 3", "no queue")
	t.Log("\n" + out)
}
