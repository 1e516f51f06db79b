-- counted/leases.lua: the counted holder store, for the scripts that renew
-- leases or report on holders (see store.lua, which also defines holds).
-- uses: store keep

-- kept is set once renew made both keys live ttl ms more: a heartbeat
-- renews all of its Locker's leases with one TTL.
local kept
local function renew(token, ttl, grow)
  local deadline = tonumber(redis.call('ZSCORE', holdersKey, token))
  if not deadline then return false end
  if not grow or deadline < nowMs() + ttl then
    redis.call('ZADD', holdersKey, nowMs() + ttl, token)
  end
  if not kept then
    keepFor(holdersKey, ttl, false)
    keepFor(stateKey, ttl, true)
    kept = true
  end
  return true
end

local function fenceOf(token)
  return tonumber(redis.call('HGET', stateKey, token) or redis.call('GET', fenceKey) or '1')
end

local function metaOwners() return redis.call('ZCARD', holdersKey) end
