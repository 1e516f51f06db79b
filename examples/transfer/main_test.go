package main

import (
	"testing"

	"github.com/fairlock/fairlock/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

func TestTransfer(t *testing.T) {
	exampletest.Run(t, run, "total before: 500", "200 transfers by 4 workers", "total after: 500")
}
