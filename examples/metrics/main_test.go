package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/fairlock/fairlock/examples/internal/exampleredis"
	"github.com/fairlock/fairlock/examples/internal/exampletest"
	"github.com/fairlock/fairlock/fairlock"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

func TestMetrics(t *testing.T) {
	printOnce := func(ctx context.Context, w io.Writer, rdb *exampleredis.Redis) error {
		return run(ctx, w, rdb, "") // no -listen
	}
	exampletest.Run(t, printOnce,
		"# TYPE fairlock_events_total counter\n",
		`fairlock_events_total{lock="reports",event="granted"} 15`+"\n",
		`fairlock_events_total{lock="reports",event="released"} 15`+"\n",
		`fairlock_wait_seconds_bucket{lock="reports",le="+Inf"} 15`+"\n",
		`fairlock_wait_seconds_count{lock="reports"} 15`+"\n",
		`fairlock_waiters{lock="reports"} 0`+"\n",
		`fairlock_held{lock="reports"} 0`+"\n",
	)
}

func TestExposition(t *testing.T) {
	m := NewMetrics()
	m.Observe(fairlock.Event{Kind: fairlock.EventGranted, Name: "a\"b", Wait: 3 * time.Millisecond})
	m.Observe(fairlock.Event{Kind: fairlock.EventGranted, Name: "a\"b", Wait: 2 * time.Second})
	var out strings.Builder
	if _, err := m.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`fairlock_events_total{lock="a\"b",event="granted"} 2`,
		`fairlock_wait_seconds_bucket{lock="a\"b",le="0.001"} 0`,
		`fairlock_wait_seconds_bucket{lock="a\"b",le="0.005"} 1`,
		`fairlock_wait_seconds_bucket{lock="a\"b",le="1"} 1`,
		`fairlock_wait_seconds_bucket{lock="a\"b",le="5"} 2`,
		`fairlock_wait_seconds_sum{lock="a\"b"} 2.003`,
	} {
		if !strings.Contains(out.String(), want+"\n") {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
