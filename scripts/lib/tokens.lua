-- tokens.lua: what a token says, and whether its owner is alive. A token
-- is "<session>:<seq>", with "#<permits>" after it when it asks for more
-- than one; a session is "<locker>.<epoch>".
-- A Locker keeps its session alive with two keys, which it renews every
-- heartbeat and which Redis drops when it stops:
--   sessionPrefix .. session          its holders live while this key does
--                                     (TTL: the Locker's lease TTL)
--   sessionPrefix .. session .. ':w'  its waiters live while this key does
--                                     (TTL: its waiter TTL, never longer
--                                     than the lease TTL); the value is the
--                                     TTL, in ms, of the record of a grant
--                                     to one of its waiters
-- A Locker that loses a session never renews it again: it starts another.
-- So no party of a dead session comes back to life.

local function sessionOf(token) return string.match(token, '^[^:]*') end

-- weight is the permits token asks for.
local function weight(token)
  local n = string.match(token, '#(%d+)$')
  return n and tonumber(n) or 1
end

-- The Locker's id names its notification channel (lib/grant.lua).
local function lockerOf(token) return string.match(token, '^[^.:]*') end

local holderLiveness, grantTTLs = {}, {}

-- holderAlive: does token's session still live, so that its grant holds.
local function holderAlive(token)
  local key = sessionPrefix .. sessionOf(token)
  local alive = holderLiveness[key]
  if alive == nil then
    alive = redis.call('EXISTS', key) == 1
    holderLiveness[key] = alive
  end
  return alive
end

-- grantTTL is the record TTL a grant to the waiter token gets, or nil when
-- its session's waiters are gone.
local function grantTTL(token)
  local key = sessionPrefix .. sessionOf(token) .. ':w'
  local ttl = grantTTLs[key]
  if ttl == nil then
    ttl = tonumber(redis.call('GET', key)) or false
    grantTTLs[key] = ttl
  end
  return ttl or nil
end

-- openSession makes token's session live, or keeps it: its Locker asks
-- for this only for a session that has never lived, or none of whose
-- parties are left in this lock.
local function openSession(token, leaseMs, waiterMs, grantMs)
  local key = sessionPrefix .. sessionOf(token)
  redis.call('SET', key, '', 'PX', leaseMs)
  redis.call('SET', key .. ':w', grantMs, 'PX', waiterMs)
  holderLiveness[key], grantTTLs[key .. ':w'] = true, tonumber(grantMs)
end
