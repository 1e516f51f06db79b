package main

import (
	"testing"

	"github.com/fairlock/fairlock/examples/internal/exampletest"
)

func TestQuickstart(t *testing.T) {
	exampletest.Run(t, quickstart, "acquired \"invoice-42\"", "released", "in Do: lock held", "Do returned", "TryAcquire got it")
}
