-- census.lua: a snapshot of a semaphore or read-write lock, read-only.
-- uses: store
-- KEYS: lock, queue, alive, fence, order, meta, state (see lib/keys.lua)
-- ARGV: none
-- Reply: {capacity in use (0 when idle), permits held, holders, live
--         waiters, last fence or 0}. Holders past their deadline, not yet
--         reaped, are not counted.
local now = nowMs()
local inUse, holders = 0, redis.call('ZRANGEBYSCORE', holdersKey, '(' .. now, '+inf')
for _, token in ipairs(holders) do inUse = inUse + weight(token) end
local waiters = redis.call('ZCOUNT', aliveKey, '(' .. now, '+inf')
local capacity = 0
if #holders > 0 or waiters > 0 then capacity = tonumber(redis.call('HGET', stateKey, 'cap') or '0') end
return {capacity, inUse, #holders, waiters, tonumber(redis.call('GET', fenceKey) or '0')}
