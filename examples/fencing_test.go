package main

import (
	"errors"
	"testing"

	"github.com/fairlock/fairlock/examples/internal/exampletest"
)

func TestFencing(t *testing.T) {
	exampletest.Run(t, fencing, "alice: write rejected", `document: "final by bob"`)
}

// The store alone: only a strictly newer fence may write.
func TestStoreRejectsStaleFences(t *testing.T) {
	ctx, rdb := exampletest.Open(t)
	s := Store{rdb: rdb.Client, key: "example-fencing:test-store"}
	rdb.Client.Del(ctx, s.key)
	for _, step := range []struct {
		fence int64
		want  error
	}{{10, nil}, {10, ErrStaleFence}, {9, ErrStaleFence}, {11, nil}} {
		if err := s.Write(ctx, step.fence, "v"); !errors.Is(err, step.want) {
			t.Errorf("write with fence %d: got %v, want %v", step.fence, err, step.want)
		}
	}
	if err := rdb.Client.Del(ctx, s.key).Err(); err != nil {
		t.Fatal(err)
	}
}
