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

-- holderLeft is how long, in ms, token's grant lives if its Locker stops
-- renewing it, by the same rules; 0 or less if it is dead.
local function holderLeft(token)
  local key = sessionKey(token)
  local mark = markOf(token)
  if mark == 'x' or not sessionAlive(token) then return 0 end
  local left = redis.call('PTTL', key)
  if mark == 'u' then left = math.min(left, redis.call('PTTL', key .. ':w')) end
  return left
end

local function lastFence() return tonumber(redis.call('GET', fenceKey) or '0') end
-- lanes.lua: priorities (WithPriority). A token that asks for priority p
-- (1 to 9), or for an aging other than the default, carries "!<p>/<aging
-- ms>" before its permits ("<session>:<seq>!3/30000#2"). Each priority
-- waits in a lane of its own: lane 0 is the queue as it always was, lane p
-- a line beside it (laneKey; with groups, one per group and lane,
-- lib/counted/queue.lua). Every waiter is in orderKey, at its arrival
-- number, µs on the server's clock; a waiter of lane 1 to 9 LANE_OFFSET
-- below it, so that they all come first and one ZRANGE (firstWaiter) tells
-- whether any waits: while none does, the head is lane 0's, at the cost it
-- always had. Else the head is the lane head of the highest level now
-- (pickLane): its priority and one more for each aging it has waited, at
-- most 9; among equal levels, the earlier arrival. So a waiter that
-- reached level 9 is passed by nobody who came after it, and one of
-- priority p waits at most (9 - p) agings more than its place among those
-- who came before it.

local LANE_OFFSET = 4503599627370496

local function arrivalOf(score)
  if score < 0 then return score + LANE_OFFSET end
  return score
end
-- fifo.lua: the waiters' arrival order, kept twice: in a list per line,
-- and in orderKey, a sorted set token -> arrival number (lib/lanes.lua),
-- which serves the head in O(1), tells a waiter's place (ZRANK) and
-- whether a token waits.

-- arrivals are the scores of the tokens this call numbered (scoreOf).
local arrivals = {}

local function waiting() return redis.call('ZCARD', orderKey) end
local groupedParties, groupLimit = 0, 0

-- setGrouping is openStore's reading of the state.
local function setGrouping(parties, limit) groupedParties, groupLimit = parties, limit end

local function groupOf(token)
  if groupedParties == 0 then return '' end
  return redis.call('HGET', stateKey, 'g:' .. token) or ''
end

local function fenceOf(token)
  return tonumber(redis.call('HGET', stateKey, token) or redis.call('GET', fenceKey) or '1')
end

local function eachHolder(fn)
  local now = nowMs()
  local list = redis.call('ZRANGE', holdersKey, 0, 1000 - 1, 'WITHSCORES')
  for i = 1, #list, 2 do
    local left = tonumber(list[i + 1]) - now
    if left > 0 then fn(list[i], left) end
  end
end
-- snapshot.lua: everything about one lock, for Inspect, read-only.
-- KEYS: see lib/keys.lua; ARGV[1..5] as there, then ARGV[6] the most
-- waiters to list; the read stops after 10 times as many queue entries.
-- Reply: {capacity or 0, last fence or 0, waiters queued in all,
--         {holder token, ms left, fence, metadata or "", group or "",
--          group's weight, ...},
--         {waiter token, ms left, metadata or "", group or "", group's
--          weight, ms waited, ...}}
-- Holders and waiters whose session died are left out: they will never
-- use the lock again. A waiter's place is its index among those listed.
-- Its wait is the server's clock less its arrival number (lib/fifo.lua),
-- which is the clock when it came, unless the clock was set back.
local state = redis.call('HMGET', stateKey, 'cap', 'glimit', 'grouped')
setGrouping(tonumber(state[3]) or 0, tonumber(state[2]) or 0)

local function left(key) return redis.call('PTTL', key) end

-- weightOf is a group's weight (the group "" and groups not yet weighed:
-- 1), read once per group.
local weights = {}
local function weightOf(group)
  if group == '' then return 1 end
  weights[group] = weights[group] or tonumber(redis.call('HGET', stateKey, 'w:' .. group)) or 1
  return weights[group]
end

local holders = {}
eachHolder(function(token, recordLeft)
  local sessionLeft = holderLeft(token)
  if sessionLeft > 0 then
    holders[#holders + 1] = token
    holders[#holders + 1] = math.min(recordLeft, sessionLeft)
    holders[#holders + 1] = fenceOf(token)
    holders[#holders + 1] = redis.call('HGET', metaKey, token) or ''
    local group = groupOf(token)
    holders[#holders + 1] = group
    holders[#holders + 1] = weightOf(group)
  end
end)

local limit = tonumber(ARGV[6])
local waiters = {}
local from, listed = 0, 0
while listed < limit and from < 10 * limit do
  local page = redis.call('ZRANGE', orderKey, from, from + limit - 1, 'WITHSCORES')
  if #page == 0 then break end
  local tokens, arrivals = {}, {}
  for i = 1, #page, 2 do
    tokens[#tokens + 1] = page[i]
    arrivals[#arrivals + 1] = arrivalOf(tonumber(page[i + 1]))
  end
  local metas = redis.call('HMGET', metaKey, unpack(tokens))
  for i, token in ipairs(tokens) do
    local waitLeft = left(sessionPrefix .. sessionOf(token) .. ':w')
    if waitLeft > 0 and listed < limit then
      listed = listed + 1
      waiters[#waiters + 1] = token
      waiters[#waiters + 1] = waitLeft
      waiters[#waiters + 1] = metas[i] or ''
      local group = groupOf(token)
      waiters[#waiters + 1] = group
      waiters[#waiters + 1] = weightOf(group)
      waiters[#waiters + 1] = math.max(0, math.floor((nowUs() - arrivals[i]) / 1000))
    end
  end
  from = from + limit
end
local capacity = tonumber(state[1]) or 0
if #holders == 0 and listed == 0 then capacity = 0 end
return {capacity, lastFence(), waiting(), holders, waiters}
