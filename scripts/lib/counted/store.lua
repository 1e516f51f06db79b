-- counted/store.lua: the holder store of a semaphore and a read-write lock
-- (lib/lock/store.lua lists the functions every store defines).
--   KEYS[1] holders  sorted set: holder token -> record deadline, server ms
--   KEYS[6] state    hash: cap (the capacity in use), used (permits
--                    held), each holder token -> the fence of its grant,
--                    and the groups' fields (counted/queue.lua)
-- A token asks for the permits after its '#' ("<session>:<seq>#3"), or 1
-- without one; a writer asks for the whole capacity of a read-write lock.
-- Holders whose record expired are dropped by the next call of any script
-- (openStore), holders whose session died by the next scan (reapHolders,
-- lib/maintain.lua), so used counts live holders within a heartbeat of
-- their end. The holders' key lives as long as the lock's other keys
-- (keepTTL), not as long as its last record: a record that expires is
-- dropped one by one, which keeps every count of the state right.
local cap, used

local function permitsHeld() return used end

-- forget removes a holder that left: released, expired, dead, or ended by
-- force.
local function forget(token)
  redis.call('ZREM', holdersKey, token)
  redis.call('HDEL', stateKey, token)
  local n = weight(token)
  used = used - n
  groupFreed(token, n)
end

-- holdersLost forgets the holders the state lists (each holder token is a
-- field, the fence of its grant) once their key is gone: it expired before
-- the state, or a rollback lost it. Their groups' counts go with them, or
-- a group would stay at its limit for holders that are no more. A token is
-- the only field whose name has a '.' before its first ':' (its session,
-- "<locker>.<epoch>"); the others start with a name of the state's own.
local function holdersLost()
  for _, field in ipairs(redis.call('HKEYS', stateKey)) do
    if string.find(field, '^[^:]*%.[^:]*:') then forget(field) end
  end
end

local function openStore(capacity, limit, strict)
  -- Its first write may be the state's count (an HSET): a call for the
  -- parties already in is admitted at full memory first (lib/keep.lua).
  if not strict then admitAtFullMemory() end
  local state = redis.call('HMGET', stateKey, 'cap', 'used', 'glimit', 'grouped')
  cap, used = tonumber(state[1]), tonumber(state[2])
  local inUseLimit = tonumber(state[3]) or 0
  setGrouping(tonumber(state[4]) or 0, inUseLimit)
  if not used then
    -- A state lost with holders still listed (evicted, or new): count them.
    used = 0
    for _, token in ipairs(redis.call('ZRANGE', holdersKey, 0, -1)) do used = used + weight(token) end
  end
  -- The holder with the earliest deadline says whether any expired, and
  -- whether the key is there at all (it expires with the lock's keys, or
  -- Redis lost it).
  local first = redis.call('ZRANGE', holdersKey, 0, 0, 'WITHSCORES')
  local freed = false
  if first[2] and tonumber(first[2]) <= nowMs() then
    for _, token in ipairs(redis.call('ZRANGEBYSCORE', holdersKey, '-inf', nowMs(), 'LIMIT', 0, BATCH)) do
      forget(token)
      redis.call('HDEL', metaKey, token)
      freed = true
    end
  end
  if used > 0 and not first[1] then
    holdersLost()
    used, freed = 0, true
  end
  if capacity and (cap ~= capacity or inUseLimit ~= limit) then
    -- strict: an Acquire, which must agree with the capacity and limit in
    -- use, or find the semaphore idle and set its own. Otherwise a
    -- heartbeat, which only puts back what was lost.
    if cap and strict and (used > 0 or waiting() > 0) then
      return freed, redis.error_reply('ERR_CAPACITY ' .. cap .. ' ' .. inUseLimit)
    end
    if strict or not cap then
      cap = capacity
      redis.call('HSET', stateKey, 'cap', cap, 'glimit', limit)
      setGrouping(tonumber(state[4]) or 0, limit)
      keepState(true)
    end
  end
  -- Written back only to a state that exists (it has a TTL); a lost one is
  -- written anew by the next grant, with its TTL.
  if freed and state[2] then redis.call('HSET', stateKey, 'used', used) end
  return freed, nil
end

local function hasRoom() return cap ~= nil and used < cap end

local function fits(token, group)
  local n = weight(token)
  return cap ~= nil and used + n <= cap and underLimit(group, n, used)
end

local function take(token, group, ttl, fence)
  local first = used == 0
  redis.call('ZADD', holdersKey, nowMs() + ttl, token)
  local n = weight(token)
  used = used + n
  redis.call('HSET', stateKey, 'used', used, token, string.format('%d', fence))
  groupTook(token, group, n)
  -- Both keys at once (counted/state.lua), at least as long as the record.
  -- A holders' key made anew lives at least as long as the state, which a
  -- Locker with a longer keepTTL may have kept longer: the state counts
  -- what the key lists, and must not outlive it.
  local holdersTTL = math.max(ttl, keepTTL)
  if first then holdersTTL = math.max(holdersTTL, redis.call('PTTL', stateKey)) end
  keepFor(holdersKey, holdersTTL, first)
  keepFor(stateKey, keepTTL, false)
  return used < cap
end

local function holds(token) return redis.call('ZSCORE', holdersKey, token) ~= false end

local function drop(token)
  if not holds(token) then return false end
  forget(token)
  redis.call('HSET', stateKey, 'used', used)
  return true
end

-- A semaphore left idle forgets its capacity, so the next Acquire sets its
-- own.
local function settle()
  if used == 0 and waiting() == 0 then redis.call('DEL', stateKey) end
end

local function renew(token, ttl)
  admitAtFullMemory() -- its first write is a ZADD
  local deadline = tonumber(redis.call('ZSCORE', holdersKey, token))
  if not deadline or not holderAlive(token) then return false end
  if deadline < nowMs() + ttl then
    redis.call('ZADD', holdersKey, nowMs() + ttl, token)
  end
  keepFor(holdersKey, math.max(ttl, keepTTL), false)
  keepFor(stateKey, math.max(ttl, keepTTL), true)
  return true
end

local function fenceOf(token)
  return tonumber(redis.call('HGET', stateKey, token) or redis.call('GET', fenceKey) or '1')
end

-- reapHolders frees the permits of holders whose session died. Holders
-- are few next to waiters, and a scan runs at most once a heartbeat.
local function reapHolders()
  local freed = false
  for _, token in ipairs(redis.call('ZRANGE', holdersKey, 0, -1)) do
    if not holderAlive(token) then
      forget(token)
      redis.call('HDEL', metaKey, token)
      freed = true
    end
  end
  if freed then redis.call('HSET', stateKey, 'used', used) end
  return freed
end

local function eachHolder(fn)
  local now = nowMs()
  local list = redis.call('ZRANGE', holdersKey, 0, BATCH - 1, 'WITHSCORES')
  for i = 1, #list, 2 do
    local left = tonumber(list[i + 1]) - now
    if left > 0 then fn(list[i], left) end
  end
end
