// Package fairlock is a fair, strictly FIFO distributed lock on Redis, with a
// fair weighted semaphore and a fair read-write lock on the same queue
// engine.
//
// Spin-and-retry locks (SET NX in a loop) are unfair: whoever retries at the
// right moment wins, so under contention the worker that just released the
// lock often takes it again while others wait for seconds, or forever.
// fairlock queues waiters in Redis instead and grants in the order their
// requests reached Redis. A release hands the lock to the head of the queue
// inside one Lua script and wakes only that waiter's process through
// pub/sub, so nobody spins.
//
// # One shape for every kind
//
// Locker.Mutex, Locker.Semaphore and Locker.RWMutex return handles for one
// name, with the same verbs: take (Acquire; Lock and RLock), try
// (TryAcquire; TryLock and TryRLock), Do (DoRead), Inspect and
// ForceRelease. Every grant is a Lease, whose Release gives back all its
// permits. Locker.Acquire, TryAcquire and Do are the mutex's shorthands.
//
//	locker, err := fairlock.New(redisClient)
//	defer locker.Close()
//	err = locker.Do(ctx, "account:42", func(ctx context.Context) error {
//		return debit(ctx, 42) // ctx is cancelled if the lease is lost
//	})
//
// One Locker per process is the normal use: it keeps all its waiters and
// leases alive with one session, renewed once per heartbeat, and shares one
// pub/sub connection (one per shard on Redis Cluster) among them.
//
// # Fairness
//
// A request is granted only when it is the oldest live waiter and its
// permits are free: a later request never passes an earlier one, even one
// that would fit. So a small request behind a large one waits, and a reader
// behind a waiting writer, and neither large requests nor writers starve.
// With WithGroup, a semaphore shares its permits between groups (tenants):
// the next grant goes to the group that has used the least permit-time
// (permits × time held) for its weight (WithGroupWeight), and FIFO holds
// within each group. With WithPriority, a mutex or semaphore request
// passes the waiters of lower priority; waiting raises a waiter one level
// per aging (WithPriorityAging), so none waits forever, and within one
// priority the order is as above.
//
// # Guarantees
//
//   - Mutual exclusion within a lease, on one Redis that does not lose data;
//     for a semaphore, never more than its capacity held, and for a
//     read-write lock, no writer beside any other holder.
//   - Strict FIFO among live waiters of one priority; Try never jumps the
//     queue.
//   - A crashed holder blocks the lock for at most the lease TTL plus a
//     heartbeat; a crashed waiter for at most the waiter TTL plus a
//     heartbeat, wherever it stands in the queue.
//   - Nothing depends on pub/sub: a lost notification delays a grant by at
//     most one heartbeat.
//   - A call that failed holds nothing once its session's TTL has passed.
//   - Every key has a TTL. Fences strictly increase per lock, in grant
//     order, even after Redis lost its data or went back to an older state.
//   - A release that a failover or a restart from an older snapshot lost
//     holds nothing: the Locker finds the loss at its next renewal and
//     gives up the session it was in.
//
// A holder paused longer than its lease's margin (see Lease) can act after
// its lock passed on, a failover of an asynchronously replicated Redis can
// lose a grant, and a jump of the Redis server's clock can shorten a lease.
// Fences are the answer to all three: pass Lease.Fence to the storage you
// guard and have it reject older fences.
//
// For operators, Inspect shows every holder and waiter of any kind,
// WithMetadata labels them, Locks lists the locks in use, and ForceRelease
// ends a stuck holder (read its warning); the command cmd/fairlock does the
// same from a shell. The package fairlocktest runs a Locker on an
// in-process miniredis for tests.
//
// # The code
//
// The files, from what every other file uses to the public handles:
//
//   - limits.go, errors.go, keys.go, replies.go, scripts.go: limits,
//     errors, key names, script replies, the script runner.
//   - events.go, options.go, kind.go, ref.go: events, options, the kinds
//     of lock (each answers where kinds differ; Kinds describes them), a
//     Locker's record of one lock.
//   - books.go: the bookkeeping, the one owner of what a Locker knows of
//     its sessions, waiters, leases and withdrawals, and the only code that
//     takes its mutex; it does no I/O and sends no event, and its methods
//     return what the caller is to do. The lock order is written there.
//   - engine.go, session.go, lease.go: the types every step shares
//     (request, waiter), sessions (their keys, renewal and deadlines) and
//     leases. What keeps a party alive is their contract with the books
//     (docs/design.md, "What keeps a party alive").
//   - notify.go, preflight.go, withdraw.go, replicas.go: pub/sub
//     notifications, the check of a Redis before its first write,
//     withdrawals that must reach Redis, WithReplicaAck.
//   - attempt.go, fastpath.go, send.go, grant.go, heartbeat.go: one Acquire
//     call (the fast path, the request that brings a token and what became
//     of it, turning a grant into a Lease) and the heartbeat.
//   - inspect.go, admin.go: the read side and the forced release.
//   - mutex.go, semaphore.go, rwmutex.go, locker.go: the public handles,
//     the Locker, New and Shutdown.
//
// The Lua is in the scripts package, one file per script over shared
// modules; docs/design.md in the repository explains both.
package fairlock
