package fairlock_test

import (
	"os"
	"testing"

	"github.com/fairlock/fairlock/internal/redistest"
)

// TestMain runs six tests at a time: each fault scenario has its own
// servers and processes, and most of its time is spent waiting on TTLs
// (on 2 cores, the package took 52 s at four, 44 s at six).
func TestMain(m *testing.M) {
	redistest.DefaultParallel(6)
	os.Exit(m.Run())
}
