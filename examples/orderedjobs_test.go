package main

import (
	"testing"

	"github.com/fairlock/fairlock/examples/internal/exampletest"
)

// orderedjobs fails by itself when a customer's jobs are processed out of arrival
// order or when fairlock lets a worker starve.
func TestOrderedJobs(t *testing.T) {
	out := exampletest.Run(t, orderedjobs, "processed [1 3 5 7 9 11]", "processed [2 4 6 8 10 12]", "SET NX spin")
	t.Log("\n" + out)
}
