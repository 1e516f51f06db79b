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

// run checks its own invariants (no overdraw, FIFO service, fenced writes)
// and returns an error when one fails.
func TestRedPacket(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "balance left ¥0.00") {
		t.Errorf("unexpected output:\n%s", out.String())
	}
}

// A holder whose lease ran out carries an older fence; its write is refused.
func TestStaleWriteRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rdb, err := exampleredis.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	rdb.Client.Del(ctx, packetKey)
	if err := write(ctx, rdb.Client, 100, 500, 2); err != nil {
		t.Fatal(err)
	}
	if err := write(ctx, rdb.Client, 99, 9999, 9); !errors.Is(err, errStale) {
		t.Fatalf("stale write: got %v, want errStale", err)
	}
	if got, _ := rdb.Client.HGet(ctx, packetKey, "balance").Int64(); got != 500 {
		t.Errorf("balance after refused write: %d, want 500", got)
	}
	rdb.Client.Del(ctx, packetKey)
}
