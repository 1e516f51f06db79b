package main

import (
	"errors"
	"testing"

	"github.com/fairlock/fairlock/examples/internal/exampletest"
)

// redpacket checks its own invariants (no overdraw, FIFO service, fenced writes)
// and returns an error when one fails.
func TestRedPacket(t *testing.T) {
	exampletest.Run(t, redpacket, "balance left ¥0.00")
}

// A holder whose lease ran out carries an older fence; its write is refused.
func TestStaleWriteRefused(t *testing.T) {
	ctx, rdb := exampletest.Open(t)
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
