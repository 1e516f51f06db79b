// Package fairlock is a fair, strictly FIFO distributed lock on Redis, with a
// fair counting semaphore and a fair read-write lock on the same queue.
//
// Spin-and-retry locks (SET NX in a loop) are unfair: whoever retries at the
// right moment wins, so under contention the worker that just released the
// lock often takes it again while others wait for seconds, or forever.
// fairlock queues waiters in a Redis list instead and grants the lock in
// the order their requests reached Redis. Release hands the lock to the
// head of the queue inside one Lua script and wakes only that waiter's
// process through pub/sub, so nobody spins.
//
// # When to use it
//
// Use fairlock when many processes contend for one lock and none may starve:
// ordered job processing, per-account serialisation, tests that assert grant
// order. For a lock that is rarely contended, a plain SET NX lock is as good.
// For correctness (not just efficiency) under pauses and failovers, no lease
// lock is enough by itself: pass Lease.Fence to the storage you guard and
// have it reject older fences.
//
// # Semaphores and read-write locks
//
// Locker.Semaphore gives a fair weighted semaphore, and Locker.RWMutex a fair
// read-write lock, which is a semaphore of MaxCapacity permits whose readers
// take one and whose writers take all. Both queue in the same strict FIFO
// order as the mutex: a request is granted only when it is the oldest live
// waiter and its permits are free, and a later request never passes an
// earlier one, even when it would fit. So a reader behind a waiting writer
// waits, and a writer waits only for the readers ahead of it. When permits
// come free, every request at the head that fits is granted in one script,
// and each Locker with a granted waiter gets one message. Every grant is a
// Lease, whose Release returns all of its permits; there is no partial
// release and no upgrade from reader to writer.
//
// # Guarantees
//
//   - Mutual exclusion within a lease, on one Redis that does not lose data;
//     for a semaphore, never more than its capacity held within the leases,
//     and for a read-write lock, no writer beside any other holder.
//   - Strict FIFO among live waiters; TryAcquire never jumps the queue.
//   - A crashed holder blocks the lock for at most the lease TTL; a crashed
//     waiter for at most the waiter TTL, wherever it stands in the queue.
//   - A lost notification, or a lease that expired with nobody releasing,
//     delays a grant by at most one heartbeat period.
//   - Every key has a TTL; a lock nobody uses leaves only its fence key,
//     which expires after a day.
//   - Fences strictly increase per lock name, even after Redis lost its data.
//
// A failover of an asynchronously replicated Redis can lose a grant, a
// paused holder can act after its lease ended, and a jump of the Redis
// server's clock can shorten a lease. Fences are the answer to all three.
//
// # Use
//
// One Locker per process is the normal use: it shares one pub/sub connection
// (one per shard on Redis Cluster) and one heartbeat timer among all its
// waiters and leases, on every lock name.
//
//	locker, err := fairlock.New(redisClient)
//	defer locker.Close()
//	err = locker.Do(ctx, "account:42", func(ctx context.Context) error {
//		return debit(ctx, 42) // ctx is cancelled if the lease is lost
//	})
//
// Acquire and Release give finer control, TryAcquire never waits, Inspect
// shows a lock's holder and queue, and WithObserver reports every step.
// For operators, Queue lists a lock's waiters in order, Names the locks in
// use, and ForceRelease ends a stuck holder's lease (read its warning);
// WithMetadata labels a waiter and then its lease (a job id, a host) for
// them to see, and for anyone else who can read the keys;
// the command cmd/fairlock does the same from a shell. The
// package fairlocktest runs a Locker on an in-process miniredis for tests.
// The options explain the lease TTL, the waiter TTL and the heartbeat.
package fairlock
