-- lock/leases.lua: the mutex's holder store, for the scripts that renew
-- leases or report on holders (see store.lua).
-- uses: store keep

local function holds(token) return current() == token end

local function renew(token, ttl, grow)
  if current() ~= token then return false end
  if grow then keepFor(lockKey, ttl, false) else redis.call('PEXPIRE', lockKey, ttl) end
  return true
end

-- The lock's holder got the last fence: a call that found the lock taken
-- may have drawn one since, which is above it and so just as safe.
local function fenceOf() return tonumber(redis.call('GET', fenceKey) or '1') end

local function metaOwners()
  if not current() then return 0 end
  return redis.call('HEXISTS', metaKey, holder)
end
