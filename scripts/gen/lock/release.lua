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

-- laneOf is the priority token asks for, 0 to 9.
local function laneOf(token)
  local lane = string.match(token, '!(%d)/')
  return lane and tonumber(lane) or 0
end

-- agingOf is how long, in ms, token waits for each level more.
local function agingOf(token)
  local aging = string.match(token, '!%d/(%d+)')
  return aging and tonumber(aging) or 30000
end

local function arrivalOf(score)
  if score < 0 then return score + LANE_OFFSET end
  return score
end

-- laneKey is the list of lane's waiters that name no group.
local function laneKey(lane)
  if lane == 0 then return queueKey end
  return queueKey .. ':' .. lane
end

-- firstWaiter is the first waiter in orderKey and its score, or nil: a
-- score below 0 means that a waiter of a higher lane waits.
local function firstWaiter()
  local first = redis.call('ZRANGE', orderKey, 0, 0, 'WITHSCORES')
  return first[1], tonumber(first[2])
end

-- pickLane is the head to grant among the heads of the lanes, and its
-- group: headOf(lane) gives a lane's head and its group, or nil. A lane
-- counts at its head's level and arrival, or, given oldestOf(lane), the
-- lane's oldest waiter, at that one's if higher: with groups a lane's
-- head is its fairest waiter, not its oldest, and a lane whose oldest
-- waiter reached level 9 must be served before any lane whose waiters all
-- came after it.
local function pickLane(headOf, oldestOf)
  local heads, tokens = {}, {}
  for lane = 0, 9 do
    local token, group = headOf(lane)
    if token then
      heads[#heads + 1] = {token = token, group = group, lane = lane}
      tokens[#tokens + 1] = token
    end
  end
  if #heads <= 1 then
    if heads[1] then return heads[1].token, heads[1].group end
    return nil
  end
  if oldestOf then
    for i, h in ipairs(heads) do
      h.oldest = oldestOf(h.lane)
      tokens[#heads + i] = h.oldest or h.token
    end
  end
  local scores = redis.call('ZMSCORE', orderKey, unpack(tokens))
  local now = nowUs()
  local function level(token, lane, at)
    return math.min(9, lane + math.floor(math.max(now - at, 0) / (1000 * agingOf(token))))
  end
  local best
  for i, h in ipairs(heads) do
    h.at = scores[i] and arrivalOf(tonumber(scores[i])) or now
    h.level = level(h.token, h.lane, h.at)
    if h.oldest and scores[#heads + i] then
      local at = arrivalOf(tonumber(scores[#heads + i]))
      local lv = level(h.oldest, h.lane, at)
      if lv > h.level or (lv == h.level and at < h.at) then h.level, h.at = lv, at end
    end
    if not best or h.level > best.level or (h.level == best.level and h.at < best.at) then best = h end
  end
  return best.token, best.group
end

-- depart forgets token's arrival; its list entry is the caller's.
local function depart(token) redis.call('ZREM', orderKey, token) end

local function waiting() return redis.call('ZCARD', orderKey) end

-- The head of list is read, not popped, until it is taken or dropped: a
-- pop and push back would delete a one-entry list and make it anew
-- without its TTL.
local function peek(list) return redis.call('LINDEX', list, 0) or nil end

-- pop takes token, the head of list, off it: LREM finds it first.
local function pop(list, token) redis.call('LREM', list, 1, token) end

-- Whether this call took waiters off the queue, for emptied.
local tookOff = false

-- A waiter whose line expired before orderKey (only its own Locker keeps
-- its line, every Locker orderKey: a dead waiter's line can go first) is
-- the head once no line has one, so that the grant loop drops it.
local function nextHead()
  local first, score = firstWaiter()
  if not first then return nil end
  if score >= 0 then return first, '' end
  return pickLane(function(lane) return peek(laneKey(lane)), '' end) or first, ''
end

local function popHead(token)
  pop(laneKey(laneOf(token)), token)
  depart(token)
  tookOff = true
end

local function waiterLeft(token) redis.call('HDEL', metaKey, token) end

-- emptied costs a command only after waiters were taken off, or when
-- asked anyway: never on an uncontended release.
local function emptied(anyway) return (tookOff or anyway) and waiting() == 0 end
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
-- grant.lua: the queue engine's grant loop, for every holder store.

-- grantHeads grants, in queue order, every live request at the head that
-- fits, and stops at the first that does not: a later request never passes
-- an earlier one, even when it would fit, or a large request (a writer)
-- could wait forever behind a stream of small ones. Dead waiters met on the
-- way are dropped. A grant's record lives as long as its waiter's session
-- asks (grantTTL), and the grant as long as the waiter does until its
-- Locker takes it up (markGranted), but for the token quiet, whose caller
-- takes it up from the reply; the waiter's metadata stays under its token,
-- now a holder's. Each Locker with a granted waiter gets one message, "token
-- fence token fence ...", with notifyCmd to notifyPrefix .. its Locker id,
-- but for the token quiet, whose caller reads its grant in the reply.
-- Returns the grants, {token, fence, ...}, or nil when there were none.
local function grantHeads(quiet)
  if not hasRoom() then return nil end
  -- The messages, by Locker: most calls grant one waiter, for which first
  -- and its message need no table.
  local grants, firstLocker, firstMessage, messages
  while true do
    local head, group = nextHead()
    if not head then break end
    local ttl = grantTTL(head)
    if ttl and not fits(head, group) then break end
    popHead(head, group)
    if ttl then
      local fence = nextFence()
      local more = take(head, group, ttl, fence)
      if head ~= quiet then
        markGranted(head)
        local locker = lockerOf(head)
        local grant = head .. ' ' .. string.format('%d', fence)
        if not firstLocker then
          firstLocker, firstMessage = locker, grant
        elseif locker == firstLocker then
          firstMessage = firstMessage .. ' ' .. grant
        else
          messages = messages or {}
          messages[locker] = messages[locker] and messages[locker] .. ' ' .. grant or grant
        end
      end
      grants = grants or {}
      grants[#grants + 1] = head
      grants[#grants + 1] = fence
      if not more then break end
    else
      waiterLeft(head, group)
    end
  end
  if firstLocker then redis.call(notifyCmd, notifyPrefix .. firstLocker, firstMessage) end
  if messages then
    for locker, message in pairs(messages) do redis.call(notifyCmd, notifyPrefix .. locker, message) end
  end
  return grants
end
-- unlock.lua: free what a holder holds and pass it on.

-- releaseIfHolder frees token's permits if it holds any and grants the
-- heads that now fit; it does so too when openStore freed the permits of
-- expired holders, or when token left the queue (a head that did not fit
-- may have been the one leaving). It drops token's metadata if hasMeta is
-- not "" (the caller gave some), and its mark (lib/tokens.lua) if marked
-- is not "": a token without either costs no command for them. Returns 1
-- if token held permits, 0 otherwise.
local function releaseIfHolder(token, hasMeta, marked, freed, left)
  if hasMeta ~= '' then redis.call('HDEL', metaKey, token) end
  if marked ~= '' then clearMark(token) end
  local held = drop(token)
  if held or freed or left then
    grantHeads()
    settle()
  end
  if held then return 1 end
  return 0
end
-- release.lua: free the permits held by token and grant the heads that fit.
-- A release counts itself in token's session (lib/tokens.lua's
-- countWrite), so that its loss in a rollback is found.
-- KEYS: see lib/keys.lua; ARGV[1..5] as there, then
-- ARGV[6] token, ARGV[7] "1" if token has metadata to drop, else "",
-- ARGV[8] "1" if its grant may still be marked as not taken up, else ""
-- Reply: 1 released; 0 token held nothing (nothing changed but its
-- metadata and mark dropped).
local freed = openStore(nil, 0, false)
local held = releaseIfHolder(ARGV[6], ARGV[7], ARGV[8], freed, false)
if held == 1 then countWrite(ARGV[6]) end
return held
