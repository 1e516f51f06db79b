package main

import (
	"testing"

	"github.com/fairlock/fairlock/examples/internal/exampletest"
)

func TestTransfer(t *testing.T) {
	exampletest.Run(t, transfer, "total before: 500", "200 transfers by 4 workers", "total after: 500")
}
