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
-- the idle set until the group comes back, or until IDLE_GROUPS debts are
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
-- lane's) goes to the idle set, of which the IDLE_GROUPS largest stay.
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
    local over = redis.call('ZCARD', idleKey) - IDLE_GROUPS
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
  for i = 1, #holders, BATCH do
    local fields = {}
    for j = i, math.min(i + BATCH - 1, #holders) do fields[#fields + 1] = 't:' .. holders[j] end
    redis.call('HDEL', stateKey, unpack(fields))
  end
  groups, laneClocks, lockMean, meanRead = {}, {}, nil, true
end

-- join: a request of group with weight (1 to 1000) joins the parties.
local function join(token, group, held, weight)
  if group == '' then return end
  if groupedParties == 0 then
    -- Every party so far named no group: they are the group "", in each
    -- lane where one waits.
    redis.call('HSET', stateKey, 'h:', held)
    keepState(true)
    groups = {}
    local r = groupRecord('')
    local first, score = firstWaiter()
    if first and score < 0 then
      for lane = 1, 9 do
        if peek(laneKey(lane)) then addLane('', r, lane) end
      end
    end
    place('')
  end
  -- The count, read by openStore, is written with the party's fields: one
  -- command, not an HINCRBY more.
  groupedParties = groupedParties + 1
  redis.call('HSET', stateKey, 'g:' .. token, group, 'w:' .. group, weight, 'grouped', groupedParties)
  if groups[group] then groups[group].weight = weight end
end

-- Joining a line with a head changes nothing of the group's.
local function enqueue(token, group, held, weight)
  join(token, group, held, weight)
  local lane = laneOf(token)
  if arrive(line(group, lane), token, lane) == 1 and groupedParties > 0 then
    local r = groupRecord(group)
    if lane > 0 and not r.clocks[lane] then addLane(group, r, lane) end
    place(group)
  end
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

-- chargeHolds charges each group what its holders have used beyond what
-- was charged for them, once per scan, in the lane of each grant: a hold
-- much longer than its group's mean counts while it lasts, not only once
-- it ends.
local function chargeHolds()
  if groupedParties == 0 then return end
  local holders = redis.call('ZRANGE', holdersKey, 0, BATCH - 1)
  if #holders == 0 then return end
  local fields = {}
  for _, token in ipairs(holders) do
    fields[#fields + 1] = 't:' .. token
    fields[#fields + 1] = 'g:' .. token
  end
  local f = redis.call('HMGET', stateKey, unpack(fields))
  local writes, moved = {}, {}
  for i, token in ipairs(holders) do
    local record = f[2 * i - 1]
    if record then
      local since, charged = string.match(record, '^(%d+) (%d+)$')
      local group = f[2 * i] or ''
      local r = groupRecord(group)
      local used = usedSince(weight(token), r.weight, tonumber(since))
      if used > tonumber(charged) then
        local lane = laneOf(token)
        r.clocks[lane] = (r.clocks[lane] or laneNow(lane)) + used - tonumber(charged)
        writes[#writes + 1] = 't:' .. token
        writes[#writes + 1] = since .. ' ' .. string.format('%d', used)
        moved[group] = moved[group] or {}
        moved[group][lane] = true
      end
    end
  end
  if #writes == 0 then return end
  for group, lanes in pairs(moved) do
    for lane in pairs(lanes) do
      writes[#writes + 1] = laneField('v', group, lane)
      writes[#writes + 1] = clockText(groups[group].clocks[lane])
    end
  end
  redis.call('HSET', stateKey, unpack(writes))
  for group in pairs(moved) do place(group, true) end
end

-- A rollback can tear the groups' keys apart: Redis drops, as it loads,
-- the keys whose TTL passed, and other calls keep the state than the
-- queue's keys. mendGroups, the scan's, mends what it tore.

-- forgetVanished forgets the grouped parties that neither hold nor wait
-- (their line, the order set or the holders' key lost): their groups would
-- stay for as long as the lock is in use. Counts cannot tell when: the
-- lock's ungrouped parties can make up for a lost grouped one. So each
-- scan visits the next BATCH slots of the state's party fields, from
-- where the last one stopped (gscan), and a full pass takes a few scans
-- however many parties there are, none of them long.
local function forgetVanished()
  local cursor = redis.call('HGET', stateKey, 'gscan') or '0'
  local reply = redis.call('HSCAN', stateKey, cursor, 'MATCH', 'g:*', 'COUNT', BATCH)
  local fields = reply[2]
  for i = 1, #fields, 2 do
    local token = string.sub(fields[i], 3)
    if not waits(token) and not redis.call('ZSCORE', holdersKey, token) then
      waiterLeft(token, fields[i + 1])
      -- Gone already, unless the count had fallen to 0 before it.
      redis.call('HDEL', stateKey, fields[i])
    end
  end
  if groupedParties > 0 then redis.call('HSET', stateKey, 'gscan', reply[1]) end
end

-- placeAgain puts the groups sets back as the state says (a groups set
-- lost): a group the state counts as placed but no set lists would never
-- be granted, nor would anyone behind it in its lane. At the cost of a
-- count per lane, HKEYS only when the sets list other than the state's
-- count of members. Each group the state knows is placed anew, from its
-- lines (and forgotten if it has nobody and nothing), at its own clock or
-- its lane's, whichever is later, as one that comes back.
local function placeAgain()
  local listed = 0
  for lane = 0, 9 do listed = listed + redis.call('ZCARD', groupsOfLane(lane)) end
  if listed == (tonumber(redis.call('HGET', stateKey, 'placed')) or 0) then return end
  local sets, members, known = {}, {'placed'}, {}
  for lane = 0, 9 do
    sets[#sets + 1] = groupsOfLane(lane)
    if lane > 0 then sets[#sets + 1] = headsOfLane(lane) end
  end
  for _, field in ipairs(redis.call('HKEYS', stateKey)) do
    local kind, group = string.match(field, '^(%a%d?):(.*)$')
    if kind == 'w' or kind == 'h' then known[group] = true end
    if kind and string.sub(kind, 1, 1) == 'm' then
      known[group] = true
      members[#members + 1] = field
    end
  end
  redis.call('DEL', unpack(sets))
  redis.call('HDEL', stateKey, unpack(members))
  groups = {}
  for group in pairs(known) do place(group) end
end

local function mendGroups()
  if groupedParties == 0 then return end
  forgetVanished()
  if groupedParties > 0 then placeAgain() end
end

local function keepQueue()
  keepFor(queueKey, keepTTL, false)
  keepFor(orderKey, keepTTL, false)
  if groupedParties > 0 then
    keepFor(groupsKey, keepTTL, false)
    keepFor(idleKey, keepTTL, false)
  end
end

-- keepLine keeps a waiter's line keepTTL ms more, and with groups its
-- lane's groups set, each once per call.
local linesKept = {}
local function keepLine(token)
  local group = groupOf(token)
  local key = lineOf(token, group)
  if linesKept[key] then return end
  keepFor(key, keepTTL, false)
  linesKept[key] = true
  local lane = laneOf(token)
  if groupedParties > 0 and lane > 0 and not linesKept[lane] then
    keepFor(groupsOfLane(lane), keepTTL, false)
    keepFor(headsOfLane(lane), keepTTL, false)
    linesKept[lane] = true
  end
end
