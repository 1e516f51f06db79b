package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fairlock/fairlock/examples/internal/exampleredis"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFencing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{"alice: write rejected", `document: "final by bob"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// The store alone: only a strictly newer fence may write.
func TestStoreRejectsStaleFences(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rdb, err := exampleredis.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
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
