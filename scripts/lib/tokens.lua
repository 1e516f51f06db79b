-- tokens.lua: what a token says, and whether its owner is alive. A token
-- is "<session>:<seq>", with "#<permits>" after it when it asks for more
-- than one; a session is "<locker>.<epoch>".
-- A Locker keeps each session alive with two keys, which it renews every
-- heartbeat and which Redis drops when it stops:
--   sessionPrefix .. session          a hash; its holders live while it
--                                     does (TTL: the Locker's lease TTL).
--                                     Its field "" is always there: it
--                                     counts the session's calls that
--                                     Redis must not lose (countWrite).
--                                     A field named by a token marks it:
--                                       "u"  a grant to a waiter that its
--                                            Locker has not taken up yet:
--                                            it lives by the waiters' key
--                                       "x"  a withdrawn token: it is never
--                                            granted or held, however late
--                                            a request with it comes
--   sessionPrefix .. session .. 'WAITERS_KEY_SUFFIX'  its waiters, and its grants marked
--                                     "u", live while this key does (TTL:
--                                     its waiter TTL, never longer than
--                                     the lease TTL); the value is the TTL,
--                                     in ms, of the record of a grant to
--                                     one of its waiters
-- A Locker that loses a session never renews it again: it starts another.
-- So no party of a dead session comes back to life.

local function sessionOf(token) return string.match(token, '^[^:]*') end

local function sessionKey(token) return sessionPrefix .. sessionOf(token) end

-- weight is the permits token asks for.
local function weight(token)
  local n = string.match(token, '#(%d+)$')
  return n and tonumber(n) or 1
end

-- The Locker's id names its notification channel (lib/grant.lua).
local function lockerOf(token) return string.match(token, '^[^.:]*') end

-- What a call learnt of each session: sessionsAlive by key, grantTTLs by
-- session, so that a scan of many waiters of few sessions builds no key
-- per waiter.
local sessionsAlive = {}
local grantTTLs = {}

-- sessionAlive: does token's session live: its holders' key, with its
-- field "" (a mark may come before the session opens: withdraw).
local function sessionAlive(token)
  local key = sessionKey(token)
  local alive = sessionsAlive[key]
  if alive == nil then
    alive = redis.call('HEXISTS', key, '') == 1
    sessionsAlive[key] = alive
  end
  return alive
end

-- grantTTL is the record TTL a grant to the waiter token gets, or nil when
-- it may not be granted: its session's waiters are gone, or the session.
local function grantTTL(token)
  local session = sessionOf(token)
  local ttl = grantTTLs[session]
  if ttl == nil then
    ttl = tonumber(redis.call('GET', sessionPrefix .. session .. 'WAITERS_KEY_SUFFIX')) or false
    if ttl and not sessionAlive(token) then ttl = false end
    grantTTLs[session] = ttl
  end
  return ttl or nil
end

-- marksRead are the marks a call read or wrote, by token (false: none):
-- an acquire asks about the holder both before and after it queues.
local marksRead = {}

-- markOf is token's mark, if any; it learns on the way whether the
-- session lives.
local function markOf(token)
  local mark = marksRead[token]
  if mark == nil then
    local key = sessionKey(token)
    local f = redis.call('HMGET', key, '', token)
    sessionsAlive[key], mark = f[1] ~= false, f[2]
    marksRead[token] = mark
  end
  return mark
end

-- holderAlive: does token's grant hold. A grant its Locker has not taken
-- up lives as long as the Locker's waiters do.
local function holderAlive(token)
  local mark = markOf(token)
  if not sessionAlive(token) then return false end
  if mark == 'u' then return grantTTL(token) ~= nil end
  return mark ~= 'x'
end

-- holderLeft is how long, in ms, token's grant lives if its Locker stops
-- renewing it, by the same rules; 0 or less if it is dead.
local function holderLeft(token)
  local key = sessionKey(token)
  local mark = markOf(token)
  if mark == 'x' or not sessionAlive(token) then return 0 end
  local left = redis.call('PTTL', key)
  if mark == 'u' then left = math.min(left, redis.call('PTTL', key .. 'WAITERS_KEY_SUFFIX')) end
  return left
end

local function withdrawn(token) return markOf(token) == 'x' end

-- markGranted marks a grant made to a waiter on its behalf: until its
-- Locker takes it up (HDEL, lib/unlock.lua and the Locker's heartbeat), a
-- waiter that died as it was granted frees the lock with its waiters' key.
local function markGranted(token)
  redis.call('HSET', sessionKey(token), token, 'u')
  marksRead[token] = 'u'
end

-- clearMark forgets token's mark: it was taken up, released or withdrawn.
local function clearMark(token)
  redis.call('HDEL', sessionKey(token), token)
  marksRead[token] = false
end

-- withdraw marks token withdrawn for good. The request that brought it may
-- have been the one to open its session: then the mark comes first, in a
-- hash that lives ttl ms unless the session opens (openSession keeps the
-- mark). A session that died takes the mark with it, and needs none.
local function withdraw(token, ttl)
  local key = sessionKey(token)
  redis.call('HSET', key, token, 'x')
  redis.call('PEXPIRE', key, ttl, 'NX')
  marksRead[token] = 'x'
end

-- openSession makes token's session live, or keeps it: its Locker asks
-- for this only for a session that has never lived, or none of whose
-- parties are left in this lock.
local function openSession(token, leaseMs, waiterMs, grantMs)
  local key = sessionKey(token)
  -- Several requests may open it at once: the first starts the count.
  redis.call('HSETNX', key, '', 1)
  redis.call('PEXPIRE', key, leaseMs)
  redis.call('SET', key .. 'WAITERS_KEY_SUFFIX', grantMs, 'PX', waiterMs)
  sessionsAlive[key], grantTTLs[sessionOf(token)] = true, tonumber(grantMs)
end

-- countWrite counts this call in token's session, in its field "" (1 when
-- the session opened). Its Locker counts the calls Redis answered that
-- counted themselves (releases, withdrawals) and renewals: a renewal that
-- finds fewer has seen Redis lose writes (a failover to a replica that
-- missed them, a restart from an older snapshot), and the Locker gives the
-- session up, which ends whatever a lost release or withdrawal left
-- behind. HINCRBY makes a field it does not find: one it made (the session
-- is not open) goes at once: a withdrawal that overtook the request that
-- opens the session is not counted, and its Locker, which had not seen the
-- session open when it sent it, does not count it either (writecount.go's
-- add). It grows memory: a call admitted at full memory runs
-- it after its first write.
local function countWrite(token)
  local key = sessionKey(token)
  if redis.call('HINCRBY', key, '', 1) == 1 then redis.call('HDEL', key, '') end
end
