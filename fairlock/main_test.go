package fairlock_test

import (
	"testing"

	"github.com/fairlock/fairlock/internal/redistest"
	"go.uber.org/goleak"
)

// TestMain runs six tests at a time: each has its own redis-server, and
// most of their time is spent waiting on TTLs, not on the CPU (on 2 cores,
// the package took 71 s at four, 48 s at six, 45 s at eight). It sets the
// state machine's budget, one that fits CI, here and not in the test, which
// runs beside the others: -rapid.checks and -rapid.steps raise it. The
// checks are each machine's (smMachines): 3 x 4, as 12 on one before.
func TestMain(m *testing.M) {
	redistest.DefaultParallel(6)
	redistest.FlagDefault("rapid.checks", "4")
	redistest.FlagDefault("rapid.steps", "25")
	goleak.VerifyTestMain(m)
}
