package main

import (
	"strings"
	"testing"
	"time"

	"github.com/fairlock/fairlock/examples/internal/exampletest"
)

// A smoke test: tenants fails by itself if a tenant was never served; here it
// must print both tables, each with every tenant.
func TestTenants(t *testing.T) {
	runFor = 300 * time.Millisecond
	out := exampletest.Run(t, tenants, "without groups: one FIFO line", "with fairlock.WithGroup(tenant)")
	for _, tenant := range []string{"noisy", "quiet-1", "quiet-2", "quiet-3"} {
		if n := strings.Count(out, "\n  "+tenant+" "); n != 2 {
			t.Errorf("%s has %d rows, want one in each table:\n%s", tenant, n, out)
		}
	}
	t.Log("\n" + out)
}
