package fairlock_test

import (
	"testing"

	"github.com/fairlock/fairlock/internal/redistest"
	"go.uber.org/goleak"
)

// TestMain runs four tests at a time: each has its own redis-server, and
// most of their time is spent waiting on TTLs, not on the CPU.
func TestMain(m *testing.M) {
	redistest.DefaultParallel(4)
	goleak.VerifyTestMain(m)
}
