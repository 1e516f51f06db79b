package main

import (
	"testing"

	"github.com/fairlock/fairlock/examples/internal/exampletest"
)

// priorities fails by itself when the jobs start in another order than the
// interactive requests first, then the batch backlog in arrival order, or
// when the batch job behind the interactive stream never starts. How long
// each waited depends on the machine, so the test does not look for it.
func TestPriorities(t *testing.T) {
	out := exampletest.Run(t, priorities,
		"started in the order: batch-1 batch-2 interactive-1 interactive-2 batch-3 batch-4 batch-5 batch-6 batch-7 batch-8",
		"fairlock.WithPriorityAging(25ms)", "  the batch job waited ")
	t.Log("\n" + out)
}
