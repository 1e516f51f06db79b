package main

import (
	"testing"

	"github.com/fairlock/fairlock/examples/internal/exampletest"
)

func TestSingleton(t *testing.T) {
	exampletest.Run(t, singleton, "a: leading, ran the job", "b: leading after a resigned", "b: lost Redis; its term is over: fairlock: lease lost",
		"c: leading after b's lease ran out", "b: a late run with its old epoch is refused",
		"observer saw leaders: [replica a replica b replica c]")
}
