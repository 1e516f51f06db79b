package main

import (
	"testing"

	"github.com/fairlock/fairlock/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// run fails by itself when a customer's jobs start out of arrival order,
// when more than limit run at once, or when fairlock lets a worker starve.
func TestCustomerLimit(t *testing.T) {
	out := exampletest.Run(t, run, "started [1 2 4 5 7 8 10 11], at most 2 at once", "started [3 6 9 12], at most 2 at once", "spinning")
	t.Log("\n" + out)
}
