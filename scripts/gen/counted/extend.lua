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

local function nowMs()
  local t = serverTime()
  return t[1] * 1000 + math.floor(t[2] / 1000)
end
-- keep.lua: TTLs that only grow.

-- keepFor makes key live at least ttl ms more, never shortening it (other
-- Lockers may use a longer TTL): one PEXPIRE GT. GT leaves a key without a
-- TTL alone, so where the key may be new (created by this call), mayBeNew
-- adds a PEXPIRE NX when GT did nothing.
local function keepFor(key, ttl, mayBeNew)
  if redis.call('PEXPIRE', key, ttl, 'GT') == 0 and mayBeNew then
    redis.call('PEXPIRE', key, ttl, 'NX')
  end
end

-- admitAtFullMemory: a Redis at full memory (maxmemory under noeviction)
-- refuses a script's first write if it may grow memory, and lets a script
-- that has written go on to its end. The scripts that serve the parties
-- already in (heartbeat, release, cancel, extend, force_release) make,
-- before a first write that may grow memory, one that cannot and changes
-- nothing (no field of metaKey is named ""), so nothing replicates: at
-- full memory, renewals, releases, withdrawals and grants to queued
-- waiters go on, while a new request (acquire.lua) is refused with Redis's
-- error. Where a script's first write never grows memory (the mutex's
-- release and extend start with a DEL, HDEL or PEXPIRE), it needs none.
local function admitAtFullMemory() redis.call('HDEL', metaKey, '') end
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
-- extend.lua: make token's grant record live at least a TTL more, never
-- shorter (an extension that comes late must not cut a later one short);
-- and take up a grant made to a waiter of the caller's, renewing its
-- session.
-- KEYS: see lib/keys.lua; ARGV[1..5] as there, then
-- ARGV[6] token, ARGV[7] TTL ms, ARGV[8] "1" if token has metadata, else
-- "", ARGV[9] "" or, to take the grant up, its session's lease TTL in ms:
-- the session's holders' key is renewed with it and token's mark dropped,
-- so the grant lives by that key alone
-- Reply: 1 extended; 0 token holds nothing or its session died (nothing
-- changed but its metadata dropped: the token has left).
local token, ttl = ARGV[6], tonumber(ARGV[7])
if not renew(token, ttl) then
  if ARGV[8] ~= '' then redis.call('HDEL', metaKey, token) end
  return 0
end
if ARGV[8] ~= '' then keepFor(metaKey, ttl, false) end
if ARGV[9] ~= '' then
  redis.call('PEXPIRE', sessionKey(token), ARGV[9])
  clearMark(token)
end
return 1
