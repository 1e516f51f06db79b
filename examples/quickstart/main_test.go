package main

import (
	"testing"

	"github.com/fairlock/fairlock/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

func TestQuickstart(t *testing.T) {
	exampletest.Run(t, run, "acquired \"invoice-42\"", "released", "in Do: lock held", "Do returned", "TryAcquire got it")
}
