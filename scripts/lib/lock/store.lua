-- lock/store.lua: the mutex's holder store. The holder is the string key
-- lockKey: its value is the holder's token, its TTL the lease.
-- uses: fence keep
--
-- Every holder store (lib/lock/ and lib/counted/) defines the same
-- functions, which the queue engine (grant.lua, unlock.lua) and the scripts
-- call; scripts.go assembles each script with one store or the other. The
-- ones the grant loop needs are in store.lua, the rest in leases.lua, so
-- that a script defines only what it may call (Redis defines every
-- function of a script anew on each call):
--   openStore(capacity, strict, ttl)  once per call, first: a counted
--                                store reaps expired holders and checks
--                                the capacity (strict: an Acquire's; else
--                                only put back if lost), keeping its state
--                                ttl ms; returns an error reply, or whether
--                                permits came free
--   hasRoom()                    may any request be granted now
--   fits(token)                  would token's permits be granted now
--   take(token, ttl, fence)      grant token for ttl ms; returns hasRoom()
--   tryTake(token, ttl)          take if it fits; returns the fence or false
--   drop(token)                  free token's permits; returns whether token held
--   settle()                     write out what drop left for a later grant
-- and in leases.lua:
--   holds(token)                 does token hold permits
--   renew(token, ttl, grow)      set (or, with grow, only lengthen) token's
--                                lease to ttl ms; returns holds(token)
--   fenceOf(token)               the fence of a holder's grant
--   metaOwners()                 holders that may have metadata

-- holder caches GET lockKey: nil unread, false free, else the token.
-- dropped is set when a drop freed the lock this call: the key is then
-- deleted only if no grant overwrote it (settle). During a Redis Cluster
-- slot migration a script fails at the first key it touches that has moved,
-- and a DEL followed by a failing grant would leave waiters behind a free
-- lock until the next heartbeat.
local holder, dropped

local function current()
  if holder == nil then holder = redis.call('GET', lockKey) end
  return holder
end

local function openStore() return false end

local function hasRoom() return not current() end

-- One permit: a request fits exactly when there is room.
local fits = hasRoom

local function take(token, ttl)
  redis.call('SET', lockKey, token, 'PX', ttl)
  holder = token
  return false
end

local function tryTake(token, ttl)
  if holder == nil then
    -- Unread: one SET NX both tests and takes.
    if not redis.call('SET', lockKey, token, 'NX', 'PX', ttl) then return false end
    holder = token
  elseif holder then
    return false
  else
    take(token, ttl)
  end
  return nextFence()
end


local function drop(token)
  if current() ~= token then return false end
  holder, dropped = false, true
  return true
end

local function settle()
  if dropped and not holder then redis.call('DEL', lockKey) end
end
