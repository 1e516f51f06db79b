package fairlock_test

import (
	"os"
	"testing"

	"github.com/fairlock/fairlock/internal/redistest"
)

// TestMain runs four tests at a time: each fault scenario has its own
// servers and processes, and most of its time is spent waiting on TTLs.
func TestMain(m *testing.M) {
	redistest.DefaultParallel(4)
	os.Exit(m.Run())
}
