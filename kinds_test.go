package fairlock_test

// The fault suite on the semaphore and the read-write lock: the mutex's
// scenarios (fairlock_test.go), written once for any kind, run with the
// kinds' requests (semKind, rwKind). The checker verifies from the merged
// history that the capacity held (for the read-write lock: no writer beside
// another holder), FIFO with the head-of-line rule, and fences in grant
// order. Durations are scaled down from the mutex's where those are long.

import (
	"testing"
	"time"

	"github.com/fairlock/fairlock/internal/redistest"
)

// The two run beside each other, each on a Redis of its own: most of
// their time is spent waiting out TTLs. Their bounds hold on a loaded
// machine. Not under -race, as no scenario of agents (newKindEnv): each
// agent a -race binary, they were the longest tests of CI's -race run (95 s
// and 65 s on an idle machine).
func TestSemFaults(t *testing.T) { t.Parallel(); redistest.SkipUnderRace(t); kindFaults(t, semKind) }

func TestRWFaults(t *testing.T) { t.Parallel(); redistest.SkipUnderRace(t); kindFaults(t, rwKind) }

func kindFaults(t *testing.T, k kind) {
	d := redistest.Long(time.Second, 3*time.Second)
	t.Run("1-fifo", func(t *testing.T) { faultFIFO(t, k, 4, 4) })
	t.Run("2-contention", func(t *testing.T) { faultContention(t, k, 4, 4, d) })
	t.Run("3-kill-holder", func(t *testing.T) { faultKillHolder(t, k, len(k.pairs)) })
	t.Run("4-kill-waiters", func(t *testing.T) { faultKillWaiters(t, k) })
	t.Run("5-paused-holder-fencing", func(t *testing.T) { faultPausedHolder(t, k) })
	t.Run("6-pubsub-kills", func(t *testing.T) { faultPubSubKills(t, k, 8) })
	t.Run("7-redis-restart", func(t *testing.T) { faultRedisRestart(t, k) })
	t.Run("8-script-flush", func(t *testing.T) { faultScriptFlush(t, k) })
	t.Run("9-cancellation", func(t *testing.T) { faultCancellation(t, k) })
	t.Run("11-paused-waiter-stale-grant", func(t *testing.T) { faultPausedWaiter(t, k) })
}
