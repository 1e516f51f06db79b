package main

import (
	"testing"

	"github.com/fairlock/fairlock/examples/internal/exampletest"
)

// customerlimit fails by itself when a customer's jobs start out of arrival order,
// when more than limit run at once, or when fairlock lets a worker starve.
// How many did run at once depends on how fast jobs arrive, which a busy
// machine slows, so the test does not look for it.
func TestCustomerLimit(t *testing.T) {
	out := exampletest.Run(t, customerlimit, "started [1 2 4 5 7 8 10 11], at most ", "started [3 6 9 12], at most ", "spinning")
	t.Log("\n" + out)
}
