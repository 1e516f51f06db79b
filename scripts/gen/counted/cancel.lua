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
    ttl = tonumber(redis.call('GET', sessionPrefix .. session .. ':w')) or false
    if ttl and not sessionAlive(token) then ttl = false end
    grantTTLs[session] = ttl
  end
  return ttl or nil
end

-- marksRead are the marks a call read or wrote, by token (false: none):
-- an acquire asks about the holder both before and after it queues.
local marksRead = {}

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
-- fifo.lua: the waiters' arrival order, kept twice: in a list per line,
-- and in orderKey, a sorted set token -> arrival number (lib/lanes.lua),
-- which serves the head in O(1), tells a waiter's place (ZRANK) and
-- whether a token waits.

-- arrivals are the scores of the tokens this call numbered (scoreOf).
local arrivals = {}

-- scoreOf is the score of token, a waiter.
local function scoreOf(token) return arrivals[token] or tonumber(redis.call('ZSCORE', orderKey, token)) end

-- depart forgets token's arrival; its list entry is the caller's.
local function depart(token) redis.call('ZREM', orderKey, token) end

local function waits(token) return redis.call('ZSCORE', orderKey, token) ~= false end

local function waiting() return redis.call('ZCARD', orderKey) end

-- The head of list is read, not popped, until it is taken or dropped: a
-- pop and push back would delete a one-entry list and make it anew
-- without its TTL.
local function peek(list) return redis.call('LINDEX', list, 0) or nil end

-- pop takes token, the head of list, off it: LREM finds it first.
local function pop(list, token) redis.call('LREM', list, 1, token) end
-- counted/state.lua: keepState for the counted store. The state counts
-- what the holders' key lists (permits in use, each group's, each
-- holder's fence), so the two are kept together, keepTTL ms at least:
-- neither may outlive the other (a holders' key made anew starts with the
-- state's TTL, counted/store.lua's take), and a record that expires is
-- dropped from both at once (openStore).

local function keepState(mayBeNew)
  keepFor(stateKey, keepTTL, mayBeNew)
  keepFor(holdersKey, keepTTL, false)
end
-- counted/queue.lua: a semaphore's queue (the functions lib/queue.lua
-- lists), with groups. While no party names a group it is one FIFO line
-- per priority, as the mutex's. Once one does, every group has its own
-- line per priority (lineOf: the group "" has laneKey's, the others
-- base .. 'gq:' .. name in lane 0, base .. 'gq<lane>:' .. name in the
-- others), and each lane is a fair queue of its own: a groups set, a clock
-- per group, and a clock of the lane. The lane to grant is chosen as
-- without groups, from the head each lane's groups set names, with the
-- oldest waiter of all counting for its lane (lib/lanes.lua).
--
-- Within a lane the next grant goes to the group with the lowest clock:
-- the permit-time (permits × µs held) its grants in the lane used,
-- divided by its weight (WithGroupWeight); among equal clocks, the group
-- whose head waited first when it joined the set. A grant charges its
-- group an estimate at once (permits × the group's mean hold ÷ weight;
-- the lock's mean for a group with none yet), the scan (lib/maintain.lua)
-- what a hold has lasted beyond that while it lasts, and its release the
-- rest: so the group just served is not the most deprived, and a group
-- whose holds are longer gets fewer grants. The lane's clock is the clock
-- of the group granted there last, before its charge (never moving back):
-- a group that starts to compete in a lane (joins its set, or is granted
-- at once) starts at its own clock or the lane's, whichever is later. So
-- it cannot bank credit while away (from idle, at its limit, or holding a
-- long job with an empty line), and keeps a debt: a group that used more
-- than its share is behind when it comes back. A group with nothing held
-- and nobody waiting is forgotten; its debt in a lane, if any, is kept in
-- the idle set until the group comes back, or until 1000 debts are
-- kept and it owes least. Within a group, strict FIFO.
-- docs/design.md says why this rule; internal/model/model.go is the same
-- rule in Go, against which the tests check this one. The state keeps:
--   grouped       the parties (waiters and holders) that named a group
--   glimit        the most permits one group may hold (0: no limit)
--   mean          the mean hold of the lock's grouped grants, µs
--   vnow, vnow<lane>  lane 0's clock, lane <lane>'s
--   g:<token>     a grouped party's group
--   t:<token>     a holder granted in grouped mode: "<µs granted> <charged>"
--   h:<group>     the permits the group holds, in every lane
--   e:<group>     its mean hold, µs (absent: none ended yet)
--   w:<group>     its weight, the one its most recent request named
--   l:<group>     the lanes above 0 where it has a clock, "13" (absent: none)
--   v:<group>, v<lane>:<group>  its clock in lane 0, in lane <lane>
--   m:<group>, m<lane>:<group>  its member in that lane's groups set
--                 (groupsKey, groupsKey .. ':' .. lane) while it is
--                 there, "<its head's arrival, 16 digits>:<group>": a
--                 sorted set of the groups whose head may be granted,
--                 scored by clock, so the next group of a lane is its first
--                 member, in O(log G) for G groups. A grant moves its
--                 group's score, not its member.
--   placed        how many member fields there are: the scan's check that
--                 the groups sets, other keys, still list them (mendGroups)
--   gscan         where the scan's visit of the g: fields stands (mendGroups)
-- and the idle set (base .. 'idle'), "<lane>:<group>" -> clock, the debts
-- of forgotten groups, and each lane above 0's heads set (headsOfLane).

local base = string.sub(stateKey, 1, -6)
local groupsKey, idleKey = base .. 'groups', base .. 'idle'
local groupedParties, groupLimit = 0, 0

-- setGrouping is openStore's reading of the state.
local function setGrouping(parties, limit) groupedParties, groupLimit = parties, limit end

local function groupsOfLane(lane)
  if lane == 0 then return groupsKey end
  return groupsKey .. ':' .. lane
end

-- headsOfLane is the heads set of lane (above 0): group -> the arrival
-- of its line's head there, so that the lane's oldest waiter is found in
-- O(log G).
local function headsOfLane(lane) return base .. 'heads:' .. lane end

-- line is the list of group's waiters in lane.
local function line(group, lane)
  if group == '' then return laneKey(lane) end
  if lane == 0 then return base .. 'gq:' .. group end
  return base .. 'gq' .. lane .. ':' .. group
end

local function lineOf(token, group) return line(group, laneOf(token)) end

-- laneField names a lane's field of group in the state: its clock ("v"),
-- its member ("m").
local function laneField(kind, group, lane)
  if lane == 0 then return kind .. ':' .. group end
  return kind .. lane .. ':' .. group
end

local function vnowField(lane)
  if lane == 0 then return 'vnow' end
  return 'vnow' .. lane
end

local function groupOf(token)
  if groupedParties == 0 then return '' end
  return redis.call('HGET', stateKey, 'g:' .. token) or ''
end

local function clockText(clock) return string.format('%d', clock) end

-- The lanes' clocks and the lock's mean hold, read once per call.
local laneClocks, lockMean, meanRead = {}, nil, false
local function laneNow(lane)
  if not laneClocks[lane] then laneClocks[lane] = tonumber(redis.call('HGET', stateKey, vnowField(lane))) or 0 end
  return laneClocks[lane]
end

local function readMean()
  if not meanRead then lockMean, meanRead = tonumber(redis.call('HGET', stateKey, 'mean')), true end
  return lockMean
end

-- Each group's fields, read once per call. lanes are the lanes it has a
-- clock in, 0 first; clocks[lane] its clock there (nil: none), members[lane]
-- its member in the lane's groups set, scores[lane] its score there.
local groups = {}
local function groupRecord(group)
  local r = groups[group]
  if r then return r end
  local f = redis.call('HMGET', stateKey, 'h:' .. group, 'e:' .. group, 'w:' .. group, 'l:' .. group, 'v:' .. group, 'm:' .. group)
  r = {held = tonumber(f[1]) or 0, mean = tonumber(f[2]), weight = tonumber(f[3]) or 1, lanes = {0},
       clocks = {[0] = tonumber(f[5])}, members = {[0] = f[6] or nil}, scores = {}}
  r.scores[0] = r.members[0] and r.clocks[0]
  if f[4] then
    local fields = {}
    for lane in string.gmatch(f[4], '%d') do
      r.lanes[#r.lanes + 1] = tonumber(lane)
      fields[#fields + 1] = laneField('v', group, tonumber(lane))
      fields[#fields + 1] = laneField('m', group, tonumber(lane))
    end
    local m = redis.call('HMGET', stateKey, unpack(fields))
    for i = 2, #r.lanes do
      local lane = r.lanes[i]
      r.clocks[lane], r.members[lane] = tonumber(m[2 * i - 3]), m[2 * i - 2] or nil
      r.scores[lane] = r.members[lane] and r.clocks[lane]
    end
  end
  groups[group] = r
  return r
end

-- addLane notes that group r has a clock in lane now.
local function addLane(group, r, lane)
  for _, l in ipairs(r.lanes) do
    if l == lane then return end
  end
  r.lanes[#r.lanes + 1] = lane
  redis.call('HSET', stateKey, 'l:' .. group, table.concat(r.lanes, '', 2))
end

-- startClock is the clock group r starts at when it starts to compete in
-- lane: its own there, or its debt in the idle set if it was forgotten,
-- or the lane's clock, whichever is latest.
local function startClock(group, r, lane)
  local own = r.clocks[lane]
  if not own then
    own = tonumber(redis.call('ZSCORE', idleKey, lane .. ':' .. group))
    if own then redis.call('ZREM', idleKey, lane .. ':' .. group) end
    if lane > 0 then addLane(group, r, lane) end
  end
  return math.max(own or 0, laneNow(lane))
end

-- underLimit tells whether group may take n more permits within the group
-- limit. While nobody names a group, every party is in the group "", which
-- holds plainHeld.
local function underLimit(group, n, plainHeld)
  if groupLimit == 0 then return true end
  local held = 0
  if groupedParties > 0 then
    held = groupRecord(group).held
  elseif group == '' then
    held = plainHeld
  end
  return held + n <= groupLimit
end

-- keepGroups keeps a lane's groups set keepTTL ms more, once per call
-- that moves a score there: a member that stays may belong to a Locker
-- with longer TTLs than the one whose call made the key, and must not
-- outlive it.
local groupsKept = {}
local function keepGroups(lane)
  if groupsKept[lane] then return end
  keepFor(groupsOfLane(lane), keepTTL, true)
  groupsKept[lane] = true
end

-- placeIn puts group r where the grant loop finds it in lane, or takes it
-- out: in the lane's groups set while its line there has a head its limit
-- lets in, at its clock. A group that joins the set starts to compete
-- (startClock). Returns whether the line has a head.
local function placeIn(group, r, lane, lineSame)
  local head
  if lineSame and groupLimit == 0 then
    head = r.members[lane] ~= nil
  else
    head = peek(line(group, lane))
  end
  -- A head with no place in the order set (a rollback tore it away) is no
  -- head: its Locker finds the waiter lost and takes it out of the line.
  local score = type(head) == 'string' and scoreOf(head)
  if type(head) == 'string' and not score then head = nil end
  local placed = head and (groupLimit == 0 or r.held + weight(head) <= groupLimit)
  local was = r.members[lane]
  local at = score and arrivalOf(score)
  if lane > 0 and type(head) ~= 'boolean' then
    -- The line was read: its head may have changed.
    if at then
      redis.call('ZADD', headsOfLane(lane), at, group)
      keepFor(headsOfLane(lane), keepTTL, true)
    else
      redis.call('ZREM', headsOfLane(lane), group)
    end
  end
  if placed and not was then
    r.clocks[lane] = startClock(group, r, lane)
    local member = string.format('%016d:', at) .. group
    redis.call('HSET', stateKey, laneField('m', group, lane), member, laneField('v', group, lane), clockText(r.clocks[lane]))
    redis.call('HINCRBY', stateKey, 'placed', 1)
    r.members[lane] = member
  elseif was and not placed then
    redis.call('ZREM', groupsOfLane(lane), was)
    redis.call('HDEL', stateKey, laneField('m', group, lane))
    redis.call('HINCRBY', stateKey, 'placed', -1)
    r.members[lane], r.scores[lane] = nil, nil
  end
  if placed and r.scores[lane] ~= r.clocks[lane] then
    redis.call('ZADD', groupsOfLane(lane), r.clocks[lane], r.members[lane])
    keepGroups(lane)
    r.scores[lane] = r.clocks[lane]
  end
  return head and true or false
end

-- forget drops group r, which holds nothing and has nobody waiting: its
-- fields go, and its debt in each lane where it has one (a clock above the
-- lane's) goes to the idle set, of which the 1000 largest stay.
local function forget(group, r)
  local fields, debts = {'h:' .. group, 'e:' .. group, 'w:' .. group, 'l:' .. group}, {}
  for _, lane in ipairs(r.lanes) do
    fields[#fields + 1] = laneField('v', group, lane)
    local clock = r.clocks[lane]
    if clock and clock > laneNow(lane) then
      debts[#debts + 1] = clockText(clock)
      debts[#debts + 1] = lane .. ':' .. group
    end
  end
  redis.call('HDEL', stateKey, unpack(fields))
  if #debts > 0 then
    redis.call('ZADD', idleKey, unpack(debts))
    keepFor(idleKey, keepTTL, true)
    local over = redis.call('ZCARD', idleKey) - 1000
    if over > 0 then redis.call('ZPOPMIN', idleKey, over) end
  end
  groups[group] = nil
end

-- place puts group in or out of each lane's groups set where it has a
-- clock (placeIn), and forgets it when it has nobody waiting and nothing
-- held. lineSame: this call left the group's lines as they were (a
-- release, a charge), so without a limit a head is there exactly when it
-- is placed, and is not read.
local function place(group, lineSame)
  local r = groupRecord(group)
  local waits = false
  for _, lane in ipairs(r.lanes) do
    if placeIn(group, r, lane, lineSame) then waits = true end
  end
  if not waits and r.held == 0 then forget(group, r) end
end

-- A party of group left for good. When it was the last grouped party, the
-- semaphore is one FIFO line again, and forgets the groups: the group ""
-- and group itself (every other group was forgotten as its last party
-- left, by place), the lanes' clocks, the idle set, and the grant records
-- of the holders left, so that a later stretch of groups starts afresh.
-- A party leaves once: a token met again (a rollback tore its line from
-- the order set, the scan forgot it, and the grant loop then finds it dead
-- at its line's head) is not counted out twice, which would forget the
-- groups of parties still there.
local function partyLeft(token, group)
  if redis.call('HDEL', stateKey, 'g:' .. token) == 0 then return end
  redis.call('HDEL', stateKey, 't:' .. token)
  groupedParties = redis.call('HINCRBY', stateKey, 'grouped', -1)
  if groupedParties > 0 then return end
  local gone, sets = {'grouped', 'mean', 'placed', 'gscan'}, {idleKey}
  for _, g in ipairs({'', group}) do
    for _, f in ipairs({'h:', 'e:', 'w:', 'l:'}) do gone[#gone + 1] = f .. g end
  end
  for lane = 0, 9 do
    gone[#gone + 1] = vnowField(lane)
    for _, g in ipairs({'', group}) do
      gone[#gone + 1] = laneField('v', g, lane)
      gone[#gone + 1] = laneField('m', g, lane)
    end
    sets[#sets + 1] = groupsOfLane(lane)
    if lane > 0 then sets[#sets + 1] = headsOfLane(lane) end
  end
  redis.call('HDEL', stateKey, unpack(gone))
  redis.call('DEL', unpack(sets))
  local holders = redis.call('ZRANGE', holdersKey, 0, -1)
  for i = 1, #holders, 1000 do
    local fields = {}
    for j = i, math.min(i + 1000 - 1, #holders) do fields[#fields + 1] = 't:' .. holders[j] end
    redis.call('HDEL', stateKey, unpack(fields))
  end
  groups, laneClocks, lockMean, meanRead = {}, {}, nil, true
end

-- laneHead is the head of lane: its groups set's first group's, with
-- groups.
local function laneHead(lane)
  if groupedParties == 0 then return peek(laneKey(lane)), '' end
  local member = redis.call('ZRANGE', groupsOfLane(lane), 0, 0)[1]
  if not member then return nil end
  local group = string.sub(member, string.find(member, ':', 1, true) + 1)
  return peek(line(group, lane)), group
end

-- laneOldest is the oldest waiter of lane, with groups: lane 0's is the
-- first of the order set scored from 0, another lane's the head of the
-- line its heads set names first.
local function laneOldest(lane)
  if lane == 0 then return redis.call('ZRANGE', orderKey, 0, '+inf', 'BYSCORE', 'LIMIT', 0, 1)[1] end
  local group = redis.call('ZRANGE', headsOfLane(lane), 0, 0)[1]
  return group and peek(line(group, lane))
end

-- nextHead: with groups, a lane's head need not be its oldest waiter,
-- whose level counts for the lane too (lib/lanes.lua).
local function nextHead()
  local first, score = firstWaiter()
  if not first then return nil end
  if score >= 0 then
    if groupedParties == 0 then return first, '' end
    return laneHead(0)
  end
  -- As the mutex's (lib/queue.lua): a waiter in no line is the head once
  -- no line has one. With groups, the scan drops it.
  if groupedParties == 0 then return pickLane(laneHead) or first, '' end
  return pickLane(laneHead, laneOldest)
end

local function popHead(token, group)
  pop(lineOf(token, group), token)
  depart(token)
end

local function waiterLeft(token, group)
  redis.call('HDEL', metaKey, token)
  if groupedParties == 0 then return end
  if group ~= '' then partyLeft(token, group) end
  if groupedParties > 0 then place(group) end
end

local function leave(token)
  local group = groupOf(token)
  depart(token)
  local queued = redis.call('LREM', lineOf(token, group), 1, token) == 1
  if queued and groupedParties > 0 then
    if group ~= '' then partyLeft(token, group) end
    if groupedParties > 0 then place(group) end
  end
  return queued
end

-- setClock writes group r's clock in lane with fields, and moves the
-- lane's clock up to at, if it is later.
local function setClock(group, r, lane, at, fields)
  fields[#fields + 1] = laneField('v', group, lane)
  fields[#fields + 1] = clockText(r.clocks[lane])
  if at and at > laneNow(lane) then
    laneClocks[lane] = at
    fields[#fields + 1] = vnowField(lane)
    fields[#fields + 1] = clockText(at)
  end
  redis.call('HSET', stateKey, unpack(fields))
end

-- groupTook and groupFreed keep a group's permits and clock, for the
-- counted store. A grant in lane p charges n × the group's mean hold ÷
-- its weight to its clock there, and records when it was made and what it
-- charged; the lane's clock moves up to the group's, before the charge. A
-- group granted at once, from no groups set, starts to compete there.
local function groupTook(token, group, n)
  if groupedParties == 0 then return end
  local r = groupRecord(group)
  local lane = laneOf(token)
  r.held = r.held + n
  local clock = r.clocks[lane]
  if not r.members[lane] then clock = startClock(group, r, lane) end
  local charge = math.max(math.floor(n * (r.mean or readMean() or 0) / r.weight), 1)
  r.clocks[lane] = clock + charge
  setClock(group, r, lane, clock, {'h:' .. group, r.held, 't:' .. token, string.format('%d %d', nowUs(), charge)})
  place(group)
end

-- usedSince is what a holder of n permits in a group of weight w has used
-- since µs since.
local function usedSince(n, w, since) return math.floor(n * math.max(nowUs() - since, 0) / w) end

-- A release (or expiry, or death) charges what the grant held, n × µs
-- held ÷ weight, less what was charged for it already, in its lane, and
-- updates the means of the group and the lock. A holder granted before the
-- groups began has no record, and is charged nothing.
local function groupFreed(token, n)
  if groupedParties == 0 then return end
  local f = redis.call('HMGET', stateKey, 'g:' .. token, 't:' .. token)
  local group = f[1] or ''
  local r = groupRecord(group)
  r.held = r.held - n
  if f[2] then
    local since, charged = string.match(f[2], '^(%d+) (%d+)$')
    since = tonumber(since)
    local hold = math.max(nowUs() - since, 0)
    local mean = readMean()
    r.mean = r.mean and math.floor(r.mean + (hold - r.mean) / 4) or hold
    lockMean = mean and math.floor(mean + (hold - mean) / 8) or hold
    local lane = laneOf(token)
    r.clocks[lane] = (r.clocks[lane] or laneNow(lane)) + usedSince(n, r.weight, since) - tonumber(charged)
    setClock(group, r, lane, nil, {'h:' .. group, r.held, 'e:' .. group, r.mean, 'mean', lockMean})
  else
    redis.call('HSET', stateKey, 'h:' .. group, r.held)
  end
  if group ~= '' then
    partyLeft(token, group)
  elseif f[2] then
    redis.call('HDEL', stateKey, 't:' .. token)
  end
  if groupedParties > 0 then place(group, true) end
end
-- counted/store.lua: the holder store of a semaphore and a read-write lock
-- (lib/lock/store.lua lists the functions every store defines).
--   KEYS[1] holders  sorted set: holder token -> record deadline, server ms
--   KEYS[6] state    hash: cap (the capacity in use), used (permits
--                    held), each holder token -> the fence of its grant,
--                    and the groups' fields (counted/queue.lua)
-- A token asks for the permits after its '#' ("<session>:<seq>#3"), or 1
-- without one; a writer asks for the whole capacity of a read-write lock.
-- Holders whose record expired are dropped by the next call of any script
-- (openStore), holders whose session died by the next scan (reapHolders,
-- lib/maintain.lua), so used counts live holders within a heartbeat of
-- their end. The holders' key lives as long as the lock's other keys
-- (keepTTL), not as long as its last record: a record that expires is
-- dropped one by one, which keeps every count of the state right.
local cap, used

-- forget removes a holder that left: released, expired, dead, or ended by
-- force.
local function forget(token)
  redis.call('ZREM', holdersKey, token)
  redis.call('HDEL', stateKey, token)
  local n = weight(token)
  used = used - n
  groupFreed(token, n)
end

-- holdersLost forgets the holders the state lists (each holder token is a
-- field, the fence of its grant) once their key is gone: it expired before
-- the state, or a rollback lost it. Their groups' counts go with them, or
-- a group would stay at its limit for holders that are no more. A token is
-- the only field whose name has a '.' before its first ':' (its session,
-- "<locker>.<epoch>"); the others start with a name of the state's own.
local function holdersLost()
  for _, field in ipairs(redis.call('HKEYS', stateKey)) do
    if string.find(field, '^[^:]*%.[^:]*:') then forget(field) end
  end
end

local function openStore(capacity, limit, strict)
  -- Its first write may be the state's count (an HSET): a call for the
  -- parties already in is admitted at full memory first (lib/keep.lua).
  if not strict then admitAtFullMemory() end
  local state = redis.call('HMGET', stateKey, 'cap', 'used', 'glimit', 'grouped')
  cap, used = tonumber(state[1]), tonumber(state[2])
  local inUseLimit = tonumber(state[3]) or 0
  setGrouping(tonumber(state[4]) or 0, inUseLimit)
  if not used then
    -- A state lost with holders still listed (evicted, or new): count them.
    used = 0
    for _, token in ipairs(redis.call('ZRANGE', holdersKey, 0, -1)) do used = used + weight(token) end
  end
  -- The holder with the earliest deadline says whether any expired, and
  -- whether the key is there at all (it expires with the lock's keys, or
  -- Redis lost it).
  local first = redis.call('ZRANGE', holdersKey, 0, 0, 'WITHSCORES')
  local freed = false
  if first[2] and tonumber(first[2]) <= nowMs() then
    for _, token in ipairs(redis.call('ZRANGEBYSCORE', holdersKey, '-inf', nowMs(), 'LIMIT', 0, 1000)) do
      forget(token)
      redis.call('HDEL', metaKey, token)
      freed = true
    end
  end
  if used > 0 and not first[1] then
    holdersLost()
    used, freed = 0, true
  end
  if capacity and (cap ~= capacity or inUseLimit ~= limit) then
    -- strict: an Acquire, which must agree with the capacity and limit in
    -- use, or find the semaphore idle and set its own. Otherwise a
    -- heartbeat, which only puts back what was lost.
    if cap and strict and (used > 0 or waiting() > 0) then
      return freed, redis.error_reply('FAIRLOCK_CAPACITY ' .. cap .. ' ' .. inUseLimit)
    end
    if strict or not cap then
      cap = capacity
      redis.call('HSET', stateKey, 'cap', cap, 'glimit', limit)
      setGrouping(tonumber(state[4]) or 0, limit)
      keepState(true)
    end
  end
  -- Written back only to a state that exists (it has a TTL); a lost one is
  -- written anew by the next grant, with its TTL.
  if freed and state[2] then redis.call('HSET', stateKey, 'used', used) end
  return freed, nil
end

local function hasRoom() return cap ~= nil and used < cap end

local function fits(token, group)
  local n = weight(token)
  return cap ~= nil and used + n <= cap and underLimit(group, n, used)
end

local function take(token, group, ttl, fence)
  local first = used == 0
  redis.call('ZADD', holdersKey, nowMs() + ttl, token)
  local n = weight(token)
  used = used + n
  redis.call('HSET', stateKey, 'used', used, token, string.format('%d', fence))
  groupTook(token, group, n)
  -- Both keys at once (counted/state.lua), at least as long as the record.
  -- A holders' key made anew lives at least as long as the state, which a
  -- Locker with a longer keepTTL may have kept longer: the state counts
  -- what the key lists, and must not outlive it.
  local holdersTTL = math.max(ttl, keepTTL)
  if first then holdersTTL = math.max(holdersTTL, redis.call('PTTL', stateKey)) end
  keepFor(holdersKey, holdersTTL, first)
  keepFor(stateKey, keepTTL, false)
  return used < cap
end

local function holds(token) return redis.call('ZSCORE', holdersKey, token) ~= false end

local function drop(token)
  if not holds(token) then return false end
  forget(token)
  redis.call('HSET', stateKey, 'used', used)
  return true
end

-- A semaphore left idle forgets its capacity, so the next Acquire sets its
-- own.
local function settle()
  if used == 0 and waiting() == 0 then redis.call('DEL', stateKey) end
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
-- cancel.lua: withdraw token, whether it still waits or was granted
-- meanwhile. Removing from the middle of a queue is the one O(N) step,
-- paid only here. A withdrawal counts itself in token's session
-- (lib/tokens.lua's countWrite), so that its loss in a rollback is found.
-- KEYS: see lib/keys.lua; ARGV[1..5] as there, then
-- ARGV[6] token, ARGV[7] "1" if token has metadata to drop, else "",
-- ARGV[8] "" or, to withdraw it for good (a request that brought it may
-- still be on its way, and must find it withdrawn: lib/tokens.lua), the
-- caller's lease TTL in ms
-- Reply: 1 token held permits and released them; 0 otherwise.
admitAtFullMemory()
local token = ARGV[6]
local freed = openStore(nil, 0, false)
local left = leave(token)
local held = releaseIfHolder(token, ARGV[7], '', freed, left)
if ARGV[8] == '' then clearMark(token) else withdraw(token, ARGV[8]) end
countWrite(token)
return held
