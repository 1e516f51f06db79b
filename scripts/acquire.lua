-- acquire.lua: take the lock if it is free and nobody waits, else queue up.
-- KEYS: lock, queue, alive, fence (see lib.lua)
-- ARGV[1] token, ARGV[2] lease TTL ms, ARGV[3] waiter TTL ms,
-- ARGV[4] notify command, ARGV[5] notify channel prefix (see lib.lua),
-- ARGV[6] "try" (never queue) or "wait"
-- Reply: {1, fence} granted; {0, 0} not granted and not queued ("try");
--        {2, position} queued, position counted from 1 among live waiters.
local token, leaseTTL, waiterTTL = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
-- A free lock with live waiters (its holder expired unreleased) goes to them
-- first: nobody jumps the queue.
if redis.call('EXISTS', lockKey) == 0 and not grantNext(ARGV[4], ARGV[5]) then
  redis.call('SET', lockKey, token, 'PX', leaseTTL)
  return {1, nextFence()}
end
if ARGV[6] == 'try' then return {0, 0} end
redis.call('RPUSH', queueKey, token)
redis.call('ZADD', aliveKey, nowMs() + waiterTTL, token)
keepFor(queueKey, waiterTTL)
keepFor(aliveKey, waiterTTL)
return {2, redis.call('ZCOUNT', aliveKey, '(' .. nowMs(), '+inf')}
