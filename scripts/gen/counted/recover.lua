-- keys.lua starts every script of a lock. Its keys share one hash tag, so a
-- Redis Cluster keeps them in one slot:
--   KEYS[1] holders  a mutex's string key (the holder's token) or a
--                    semaphore's sorted set (lib/counted/store.lua)
--   KEYS[2] queue    list: waiter tokens in arrival order (with groups:
--                    the waiters that named none, lib/counted/queue.lua)
--   KEYS[3] order    sorted set: every waiter token -> its arrival number,
--                    so that ZRANK is its place in the queue
--   KEYS[4] fence    string: the last fence drawn (lib/fence.lua)
--   KEYS[5] meta     hash: token -> the caller's metadata, for the waiters
--                    and holders that gave some
--   KEYS[6] state    hash: the store's counts and the scan's schedule
-- and every script of a lock starts its ARGV with
--   ARGV[1] the key prefix of the sessions (lib/tokens.lua)
--   ARGV[2] the notify command, PUBLISH or SPUBLISH (lib/grant.lua)
--   ARGV[3] the notify channel prefix
--   ARGV[4] keepTTL: how long, in ms, the lock's keys must live at least
--           after this call (the caller's: 30 times its longer TTL; keys
--           only grow)
--   ARGV[5] the caller's heartbeat, in ms: how often its calls scan for
--           dead parties (lib/maintain.lua)
local holdersKey, queueKey, orderKey, fenceKey, metaKey, stateKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local sessionPrefix, notifyCmd, notifyPrefix = ARGV[1], ARGV[2], ARGV[3]
local keepTTL = tonumber(ARGV[4])

-- clock.lua: the server's clock, read once per call and only when needed.
-- Every deadline comes from it, never from a client's clock; time stands
-- still during a script, so one reading serves the whole call.
local timeReading
local function serverTime()
  if not timeReading then timeReading = redis.call('TIME') end
  return timeReading
end

local function nowUs()
  local t = serverTime()
  return t[1] * 1000000 + t[2]
end
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
--   sessionPrefix .. session .. ':w'  its waiters, and its grants marked
--                                     "u", live while this key does (TTL:
--                                     its waiter TTL, never longer than
--                                     the lease TTL); the value is the TTL,
--                                     in ms, of the record of a grant to
--                                     one of its waiters
-- A Locker that loses a session never renews it again: it starts another.
-- So no party of a dead session comes back to life.

local function sessionOf(token) return string.match(token, '^[^:]*') end

local function sessionKey(token) return sessionPrefix .. sessionOf(token) end

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
    ttl = tonumber(redis.call('GET', sessionPrefix .. session .. ':w')) or false
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
-- fence.lua: fencing tokens.

-- drawFence returns the next fence of the counter at key: one above the
-- last, and at least the server's time in µs. A counter alone would hand a
-- fence out twice after Redis rolled back (a failover to a replica that
-- missed the last grants, a restart from an older snapshot) and kept an
-- older count; the clock keeps fences growing across such a loss, and
-- across the loss of the key, as long as the clock of the server that
-- grants after it is ahead of the one that granted before (by more than
-- the grants one call made: time stands still in a call). The key lives a
-- day (scripts.FenceTTLMs) after the last grant.
local function drawFence(key)
  local fence = math.max(tonumber(redis.call('GET', key) or '0') + 1, nowUs())
  redis.call('SET', key, string.format('%d', fence), 'PX', 86400000)
  return fence
end

local function nextFence() return drawFence(fenceKey) end

local function waits(token) return redis.call('ZSCORE', orderKey, token) ~= false end

-- placeOf is token's place in the queue, 1 first, or nil.
local function placeOf(token)
  local rank = redis.call('ZRANK', orderKey, token)
  return rank and rank + 1
end

local function waiting() return redis.call('ZCARD', orderKey) end

local function holds(token) return redis.call('ZSCORE', holdersKey, token) ~= false end

local function fenceOf(token)
  return tonumber(redis.call('HGET', stateKey, token) or redis.call('GET', fenceKey) or '1')
end
-- recover.lua: what became of a request whose answer was lost, sent with
-- token: acquire.lua, or the fast path. If it reached Redis, answer as it
-- did: the fence if token holds permits (the caller takes the grant up with
-- this answer), or its place if it waits. If not, withdraw token for good,
-- so that the request changes nothing if it comes later: a network may
-- deliver it after this call. go-redis never sends such a request twice (a
-- retry could come before it); this script it may send again, since a
-- second run answers as the first did.
-- KEYS: see lib/keys.lua; ARGV[1..5] as there, then ARGV[6] token,
-- ARGV[7] "count" to count the place, or "fast" for the fast path's
-- request, ARGV[8] the caller's lease TTL in ms: how long the mark lives
-- if the session's keys are not there yet (the lost request may have been
-- the one to open them)
-- Reply: the fence (> 0) if token holds permits; if it waits, -place
-- under "count" (1 is next), else -1; 0 if it did neither and is
-- withdrawn now (counted in its session: lib/tokens.lua's countWrite).
-- Errors: FAIRLOCK_SESSION if token holds or waits but its session is
-- gone (the fast path's SET runs whether the session lives or not): the
-- grant or place is void, and the caller starts another session.
-- FAIRLOCK_QUEUED if the fast path's token holds the lock while waiters
-- are queued, who may have come before it: the caller hands the lock to
-- them, as the fast path does (cancel.lua), and queues.
local token = ARGV[6]
if holds(token) then
  if not holderAlive(token) then return redis.error_reply('FAIRLOCK_SESSION') end
  if ARGV[7] == 'fast' and waiting() > 0 then return redis.error_reply('FAIRLOCK_QUEUED') end
  clearMark(token)
  -- A fast path that found waiters queued took the lock without a fence
  -- (acquire_fast.lua): if it is still the holder, its grant gets one now.
  if ARGV[7] == 'fast' then return nextFence() end
  return fenceOf(token)
end
if waits(token) then
  if not grantTTL(token) then return redis.error_reply('FAIRLOCK_SESSION') end
  if ARGV[7] == 'count' then return -placeOf(token) end
  return -1
end
withdraw(token, ARGV[8])
countWrite(token)
return 0
