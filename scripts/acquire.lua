-- acquire.lua: take the permits if they are free and nobody waits, else
-- queue up.
-- uses: grant keep
-- KEYS: lock, queue, alive, fence, order, meta[, state] (see lib/keys.lua)
-- ARGV[1] token, ARGV[2] lease TTL ms, ARGV[3] waiter TTL ms,
-- ARGV[4] notify command, ARGV[5] notify channel prefix (see lib/grant.lua),
-- ARGV[6] "try" (never queue), "wait" (queue), or "count" (queue and count
-- the position), ARGV[7] the caller's metadata, or "" for none,
-- ARGV[8] the capacity (semaphore and read-write lock only)
-- Reply: an integer (an array would cost Redis a deferred reply): the
-- fence (> 0) if granted; 0 if not granted and not queued ("try"); if
-- queued, -position under "count" (counted from 1 among live waiters),
-- else -1. An error "FAIRLOCK_CAPACITY <capacity>" if the semaphore is in
-- use with another capacity; then nothing changed.
local token, meta = ARGV[1], ARGV[7]
local leaseTTL, waiterTTL = tonumber(ARGV[2]), tonumber(ARGV[3])
-- (ARGV[8] and ...: miniredis's Lua refuses tonumber(nil).)
local freed = openStore(ARGV[8] and tonumber(ARGV[8]), true, math.max(leaseTTL, waiterTTL))
if type(freed) == 'table' then return freed end
-- Permits an expired holder left go to the waiters first.
if freed then grantHeads(ARGV[4], ARGV[5]) end
-- storeMeta keeps the caller's metadata, if any, under token for at least
-- ttl ms: as long as the grant or the waiter it belongs to. The hash may be
-- new: the last release or cancel removed it with its last entry.
local function storeMeta(ttl)
  if meta == '' then return end
  redis.call('HSET', metaKey, token, meta)
  keepFor(metaKey, ttl, true)
end
-- Free permits with an empty queue are taken at once: for a mutex in three
-- commands (the Go fast path does the same without a script; this is for
-- calls with metadata and for Lockers that found the lock busy). Free
-- permits with waiters queued (a holder expired unreleased, or the waiters
-- are dead) go to the waiters first: nobody jumps the queue.
local fence = tryTake(token, leaseTTL)
if fence then
  if redis.call('EXISTS', queueKey) == 0 then
    storeMeta(leaseTTL)
    return fence
  end
  drop(token)
  grantHeads(ARGV[4], ARGV[5])
  fence = redis.call('EXISTS', queueKey) == 0 and tryTake(token, leaseTTL)
  settle()
  if fence then
    storeMeta(leaseTTL)
    return fence
  end
end
if ARGV[6] == 'try' then return 0 end
local queued = redis.call('RPUSH', queueKey, token)
redis.call('ZADD', aliveKey, nowMs() + waiterTTL, token)
-- Each waiter's order is one above the last live waiter's.
local last = redis.call('ZRANGE', orderKey, -1, -1, 'WITHSCORES')
redis.call('ZADD', orderKey, (tonumber(last[2]) or 0) + 1, token)
-- alive and order hold the same live waiters: both are new when order was
-- empty. The list may also hold dead entries: it is new when it had none.
keepFor(queueKey, waiterTTL, queued == 1)
keepFor(aliveKey, waiterTTL, #last == 0)
keepFor(orderKey, waiterTTL, #last == 0)
storeMeta(waiterTTL)
if ARGV[6] ~= 'count' then return -1 end
return -redis.call('ZCOUNT', aliveKey, '(' .. nowMs(), '+inf')
