package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fairlock/fairlock/examples/internal/exampleredis"
	"github.com/fairlock/fairlock/examples/internal/exampletest"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// urlWriter collects the example's output and hands over the URL it
// announces.
type urlWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
	url chan string
}

var servingURL = regexp.MustCompile(`serving (http://\S+/metrics)`)

func (u *urlWriter) Write(p []byte) (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.buf.Write(p)
	if m := servingURL.FindSubmatch(p); m != nil {
		u.url <- string(m[1])
	}
	return len(p), nil
}

func (u *urlWriter) String() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.buf.String()
}

// TestPrometheus runs the example on a free port, scrapes /metrics as
// Prometheus would, and checks the values the workload must have left.
func TestPrometheus(t *testing.T) {
	ctx, rdb := exampletest.Open(t)
	ctx, cancel := context.WithCancel(ctx)
	out := &urlWriter{url: make(chan string, 1)}
	done := make(chan error, 1)
	go func() { done <- run(ctx, out, rdb, "127.0.0.1:0") }()
	var url string
	select {
	case url = <-out.url:
	case err := <-done:
		t.Fatalf("run ended before serving: %v\n%s", err, out)
	case <-ctx.Done():
		t.Fatalf("never served:\n%s", out)
	}
	body := scrape(t, url)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}

	lock := `fairlock_lock_name="reports"`
	granted := sample(t, body, "fairlock_acquire_wait_seconds_count", lock, `fairlock_outcome="granted"`)
	if granted != grants {
		t.Errorf("wait histogram count for granted = %v, want the %d grants made", granted, grants)
	}
	if n := sample(t, body, "fairlock_lease_grants_total", lock); n != grants {
		t.Errorf("grants counter = %v, want %d", n, grants)
	}
	if n := sample(t, body, "fairlock_acquire_wait_seconds_count", lock, `fairlock_outcome="timed_out"`); n != 1 {
		t.Errorf("timed-out waits = %v, want 1", n)
	}
	if n := sample(t, body, "fairlock_lease_hold_seconds_count", lock, `fairlock_lease_end="released"`); n != grants {
		t.Errorf("hold histogram count = %v, want %d", n, grants)
	}
	if n := sample(t, body, "fairlock_lease_hold_seconds_sum", lock, `fairlock_lease_end="released"`); n < workers*rounds*0.002 {
		t.Errorf("hold histogram sum = %vs, want at least the workers' 2 ms sleeps", n)
	}
	if n := sample(t, body, "fairlock_waiters", lock); n != 0 {
		t.Errorf("waiters after the workload = %v, want 0", n)
	}
	for _, want := range []string{
		"# TYPE fairlock_acquire_wait_seconds histogram",
		"# TYPE fairlock_lease_hold_seconds histogram",
		`fairlock_acquire_wait_seconds_bucket{fairlock_lock_kind="mutex",fairlock_lock_name="reports",fairlock_outcome="granted"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", body)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v\n%s", url, resp.Status, err, body)
	}
	return string(body)
}

// sample returns the value of the one sample of metric whose labels include
// all of labels.
func sample(t *testing.T, body, metric string, labels ...string) float64 {
	t.Helper()
	var found []string
lines:
	for _, line := range strings.Split(body, "\n") {
		name, rest, ok := strings.Cut(line, "{")
		if !ok || name != metric {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(rest, l) {
				continue lines
			}
		}
		found = append(found, line)
	}
	if len(found) != 1 {
		t.Fatalf("%d samples of %s with %v, want 1: %q", len(found), metric, labels, found)
	}
	v, err := strconv.ParseFloat(found[0][strings.LastIndexByte(found[0], ' ')+1:], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestStdout runs the -stdout variant and checks that the SDK printed the
// instruments.
func TestStdout(t *testing.T) {
	out := exampletest.Run(t, func(ctx context.Context, w io.Writer, rdb *exampleredis.Redis) error {
		return runStdout(ctx, w, rdb)
	}, `"Name": "fairlock.acquire.wait"`, `"Name": "fairlock.lease.hold"`, `"Name": "fairlock.lease.grants"`)
	if !strings.Contains(out, `"Value": `+strconv.Itoa(grants)) {
		t.Errorf("no counter of %d grants in:\n%s", grants, out)
	}
}
