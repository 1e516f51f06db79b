-- counted/store.lua: the holder store of a semaphore and a read-write lock
-- (lib/lock/store.lua lists the functions every store defines; the ones
-- that renew leases and report on holders are in leases.lua).
--   KEYS[1] holders  sorted set: holder token -> lease deadline, server ms
--   KEYS[7] state    hash: cap (the capacity in use), used (permits held),
--                    and each holder token -> the fence of its grant
-- A token asks for the permits after its '#' ("<locker>:<seq>#3"), or 1
-- without one; a writer asks for the whole capacity of a read-write lock.
-- Holders whose deadline passed are dropped by the next call of any script
-- (openStore), so used counts live holders only.
-- uses: clock fence keep
local holdersKey, stateKey = KEYS[1], KEYS[7]
local cap, used

local function weight(token)
  local n = string.match(token, '#(%d+)$')
  return n and tonumber(n) or 1
end

-- forget removes a holder that left (released, expired, or ended by force).
local function forget(token)
  redis.call('ZREM', holdersKey, token)
  redis.call('HDEL', stateKey, token)
  used = used - weight(token)
end

-- Each call reaps at most this many expired holders, so that one call
-- never holds Redis long; the next reaps the rest.
local reapBatch = 1000

local function openStore(capacity, strict, ttl)
  local state = redis.call('HMGET', stateKey, 'cap', 'used')
  cap, used = tonumber(state[1]), tonumber(state[2])
  if not used then
    -- A state lost with holders still listed (evicted, or new): count them.
    used = 0
    for _, token in ipairs(redis.call('ZRANGE', holdersKey, 0, -1)) do used = used + weight(token) end
  end
  -- The holder with the earliest deadline says whether any expired, and
  -- whether the key is there at all: it expires with its last lease, and
  -- no call may come between that lease's deadline and the key's end to
  -- reap it.
  local first = redis.call('ZRANGE', holdersKey, 0, 0, 'WITHSCORES')
  local expired = {}
  if first[2] and tonumber(first[2]) <= nowMs() then
    expired = redis.call('ZRANGEBYSCORE', holdersKey, '-inf', nowMs(), 'LIMIT', 0, reapBatch)
  end
  for _, token in ipairs(expired) do
    forget(token)
    redis.call('HDEL', metaKey, token)
  end
  local freed = #expired > 0
  if used > 0 and not first[1] then used, freed = 0, true end
  if capacity and cap ~= capacity then
    -- strict: an Acquire, which must agree with the capacity in use, or
    -- find the semaphore idle and set its own. Otherwise a heartbeat,
    -- which only puts back a capacity that was lost.
    if cap and strict and (used > 0 or redis.call('ZCOUNT', aliveKey, '(' .. nowMs(), '+inf') > 0) then
      return redis.error_reply('FAIRLOCK_CAPACITY ' .. cap)
    end
    if strict or not cap then
      cap = capacity
      redis.call('HSET', stateKey, 'cap', cap)
      keepFor(stateKey, ttl, true)
    end
  end
  -- Written back only to a state that exists (it has a TTL); a lost one is
  -- written anew by the next grant, with its TTL.
  if freed and state[1] then redis.call('HSET', stateKey, 'used', used) end
  return freed
end

local function hasRoom() return cap ~= nil and used < cap end

local function fits(token) return cap ~= nil and used + weight(token) <= cap end

-- The holders key is new when nothing was held. The state is not: its
-- capacity was read (or written, with a TTL) by openStore.
local function take(token, ttl, fence)
  local first = used == 0
  redis.call('ZADD', holdersKey, nowMs() + ttl, token)
  used = used + weight(token)
  redis.call('HSET', stateKey, 'used', used, token, string.format('%d', fence))
  keepFor(holdersKey, ttl, first)
  keepFor(stateKey, ttl, false)
  return used < cap
end

local function tryTake(token, ttl)
  if not fits(token) then return false end
  local fence = nextFence()
  take(token, ttl, fence)
  return fence
end

-- holds is also leases.lua's.
local function holds(token) return redis.call('ZSCORE', holdersKey, token) ~= false end

local function drop(token)
  if not holds(token) then return false end
  forget(token)
  redis.call('HSET', stateKey, 'used', used)
  return true
end

-- Nothing is left for later; a semaphore left idle forgets its capacity,
-- so the next Acquire sets its own.
local function settle()
  if used == 0 and redis.call('EXISTS', queueKey) == 0 then redis.call('DEL', stateKey) end
end
