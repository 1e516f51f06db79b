-- lock/store.lua: the mutex's holder store. The holder is the string key
-- holdersKey: its value is the holder's token, its TTL the record's.
--
-- Every holder store (lib/lock/ and lib/counted/) defines the functions
-- the queue engine (grant.lua, unlock.lua, maintain.lua) and the scripts
-- call; scripts.go assembles each script with one store or the other:
--   openStore(capacity, limit, strict)  first in every call: a counted
--                              store reaps expired holders and checks the
--                              capacity and group limit (strict: an
--                              Acquire's; else only put back if lost);
--                              returns whether permits came free, and an
--                              error reply or nil
--   hasRoom()                  may any request be granted now
--   fits(token, group)         would token's permits be granted now
--   take(token, group, ttl, fence)  grant token, its record living ttl
--                              ms; returns hasRoom()
--   drop(token)                free token's permits; returns whether it held
--   settle(anyway)             forget what an idle lock needs no more:
--                              its state (anyway: look even if this
--                              call took no waiter off)
--   holds(token)               does token hold permits
--   renew(token, ttl)          make token's record live at least ttl ms
--                              more (never shorter: a renewal that comes
--                              late must not cut a later one short);
--                              returns holds(token)
--   fenceOf(token)             the fence of a holder's grant
--   permitsHeld()              the permits held now
--   reapHolders()              free what holders whose session died hold
--   eachHolder(fn)             fn(token, record ms left) for every holder
-- A holder whose session died holds nothing: the mutex's is dropped when
-- a grant finds it (hasRoom), the counted store's by reapHolders.

-- holder caches the holder: nil unread, false free, else its token.
local holder

local function current()
  if holder == nil then holder = redis.call('GET', holdersKey) or false end
  return holder
end

local function openStore() return false, nil end

-- The lock has room when it is free, or when its holder's session died:
-- then the holder is dropped here. A holder's own calls (release, extend)
-- need not ask: if its token is still there, nobody else was granted.
local function hasRoom()
  local token = current()
  if token and not holderAlive(token) then
    redis.call('DEL', holdersKey)
    redis.call('HDEL', metaKey, token)
    holder = false
  end
  return not holder
end

-- One permit: a request fits exactly when there is room.
local function fits() return hasRoom() end

local function take(token, group, ttl)
  redis.call('SET', holdersKey, token, 'PX', ttl)
  holder = token
  return false
end

local function drop(token)
  if current() ~= token then return false end
  redis.call('DEL', holdersKey)
  holder = false
  return true
end

-- The state holds only the scan's schedule, which a lock with nobody
-- waiting does not need.
local function settle(anyway)
  if emptied(anyway) then redis.call('DEL', stateKey) end
end

local function holds(token) return current() == token end

local function renew(token, ttl)
  if current() ~= token or not holderAlive(token) then return false end
  keepFor(holdersKey, ttl, false)
  return true
end

-- The holder got the last fence: a call that found the lock taken may
-- have drawn one since, which is above it and so just as safe.
local function fenceOf() return lastFence() end

local function permitsHeld()
  if current() then return 1 end
  return 0
end

local function reapHolders() return false end

local function eachHolder(fn)
  if current() then fn(holder, redis.call('PTTL', holdersKey)) end
end
