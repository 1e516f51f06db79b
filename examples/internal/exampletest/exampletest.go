// Package exampletest runs the examples in their tests: a test runs an
// example's body the way its main function does, on a Redis of its own, and
// checks what the example printed.
package exampletest

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fairlock/fairlock/examples/internal/exampleredis"
)

// Timeout bounds each test's context: a bound for a test that got stuck,
// not a speed claim. Every example finishes in a few seconds; 5s ran out
// under -race on a 2-core machine with a core kept busy (examples/tenants.go,
// whose FIFO half took most of it).
const Timeout = 20 * time.Second

// Main is the examples' TestMain: it runs the tests, then fails if any
// goroutine is still running, such as a Locker's or a client's left open.
// The check runs after every test's cleanups, which close what Open opened.
func Main(m *testing.M) { goleak.VerifyTestMain(m) }

// Open returns a context that ends after Timeout and the examples' Redis
// (see exampleredis.Open); both are closed when the test ends.
func Open(t testing.TB) (context.Context, *exampleredis.Redis) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	rdb, err := exampleredis.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return ctx, rdb
}

// Run runs an example's body as exampleredis.Main does, but with Open's
// context and Redis, and returns what it printed. It fails the test, showing
// the output, if run returns an error or if the output lacks any of want.
func Run(t testing.TB, run exampleredis.Run, want ...string) string {
	t.Helper()
	ctx, rdb := Open(t)
	var out bytes.Buffer
	if err := run(ctx, &out, rdb); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
	return out.String()
}
