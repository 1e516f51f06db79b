package main

import (
	"testing"

	"github.com/fairlock/fairlock/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }
