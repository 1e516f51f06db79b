package fairlock

import "time"

// The limits of what fairlock accepts, in one place: a value past one is
// refused with ErrInvalid before any Redis call (a Redis older than
// MinRedisVersion, at its first call).

// MaxNameLen is the longest lock name, in bytes, that fairlock accepts. A
// name is repeated in each of a lock's six keys, in every script call, and
// on Redis Cluster in its notification channel; escaping can triple it. At
// 4 KiB a call carries at most 72 KiB of name, while any real name (a path,
// a URL, a composite id) fits with room to spare. Longer names are refused
// with ErrInvalid before any Redis call.
const MaxNameLen = 4 << 10

// MaxCapacity is the largest capacity a Semaphore takes. Permits are
// counted in Lua, whose numbers are exact integers up to 2^53; 2^30 leaves
// room for any sum of them. A read-write lock is a semaphore of this
// capacity whose writers take all of it.
const MaxCapacity = 1 << 30

// MaxMetadataLen is the longest metadata, in bytes, that WithMetadata
// accepts: enough for a job id, a host name and a little more, while an
// Inspect reply of MaxListed holders and waiters stays within 8 MiB of it.
const MaxMetadataLen = 4 << 10

// MaxValueLen is the longest value, in bytes, that an election's leader
// publishes (Election.Campaign, Term.Proclaim): every observer reads each
// one, and a log of them is kept.
const MaxValueLen = 64 << 10

// MaxGroupLen is the longest group name, in bytes, that WithGroup accepts.
const MaxGroupLen = 256

// MaxListed is the most holders and waiters Inspect lists: a reply for a
// queue of a million waiters would hold Redis for a long time.
// State.Queued still counts every waiter.
const MaxListed = 1000

// MinRedisVersion is the oldest Redis fairlock runs on: its scripts use
// PEXPIRE NX and GT and SET NX GET.
const MinRedisVersion = "7.0.0"

// The limits of a Locker's TTLs.
const (
	// MinHeartbeat is the shortest heartbeat New accepts: the lease and
	// waiter TTLs must both be at least 3 × MinHeartbeat (75 ms). A shorter
	// period adds Redis load (one call per lock with waiters, per Locker and
	// period) faster than it cuts recovery time, and comes close to a round
	// trip on a loaded machine, where waiters would lose their places to
	// scheduling delays.
	MinHeartbeat = 25 * time.Millisecond
	// MaxTTL is the longest lease, waiter or Extend TTL accepted: a lock's
	// keys live 30 times the longer TTL, which must stay a count of
	// milliseconds Redis and a time.Duration both hold; and a crashed holder
	// that blocks a lock for more than a day is not what a lease is for
	// (auto-renew keeps a live holder's lease as long as it likes).
	MaxTTL = 24 * time.Hour
)
