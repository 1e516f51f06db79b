-- counted/queue.lua: a semaphore's queue (the functions lib/queue.lua
-- lists), with groups. While no party names a group it is one FIFO line
-- per priority, as the mutex's. Once one does, every group has its own
-- line per priority (lineOf: the group "" has laneKey's, the others
-- base .. 'gq:' .. name in lane 0, base .. 'gq<lane>:' .. name in the
-- others), each lane has its own groups set, and the lane to grant is
-- chosen as without groups, from the head each lane's groups set names
-- (lib/lanes.lua). Within a lane, the next grant goes to the group with
-- the lowest virtual clock: the permit-time
-- (permits × µs held) its grants used, divided by its weight
-- (WithGroupWeight). A grant charges its group an estimate at once
-- (permits × the group's mean hold ÷ weight; the lock's mean for a group
-- with none yet), the scan (lib/maintain.lua) what a hold has lasted
-- beyond that while it lasts, and its release the rest: so the group just
-- served is not the most deprived, and a group whose holds are longer
-- gets fewer grants. A group new or back from idle (forgotten: nothing
-- held, nobody waiting) starts at the clock of the group granted last,
-- which was the lowest waiting then: it cannot bank credit. A group that
-- holds permits keeps its clock, which its holds move, while its line is
-- empty: with many grants each, a heavy group's line empties between a
-- release and its next request, which must not cost it its lead.
-- Among equal clocks, a group never served goes first, in its head's
-- arrival order (a grant charges at least 1, so served groups' clocks
-- rarely tie; then by name). Within a group, strict FIFO.
-- docs/design.md says why this rule. The state hash keeps:
--   grouped     the parties (waiters and holders) that named a group
--   glimit      the most permits one group may hold (0: no limit)
--   vnow        the clock of the group granted last, before its charge
--   mean        the mean hold of the lock's grouped grants, µs
--   g:<token>   a grouped party's group
--   t:<token>   a holder granted in grouped mode: "<µs granted> <charged>"
--   h:<group>   the permits the group holds
--   s:<group>   "1" once it was served; absent: never
--   v:<group>   its clock
--   e:<group>   its mean hold, µs (absent: none ended yet)
--   w:<group>   its weight, the one its most recent request named
--   m:<group>   its member in groupsKey, lane 0's groups set, while it
--               is there: a sorted set of the groups whose head may be
--               granted, scored by clock; the member is "1:<group>" once
--               served, before that "0<its head's arrival, 16
--               digits>:<group>"
--   l:<group>   the lanes above 0 where it has a line, "13" (absent: none)
--   m<lane>:<group>  its member in that lane's groups set, groupsKey ..
--               ':' .. lane
-- so the next group of a lane is the first member, in O(log G) for G
-- groups. A grant moves its group's score in each lane it waits in (one
-- ZADD each), not its member.

local base = string.sub(stateKey, 1, -6)
local groupsKey = base .. 'groups'
local groupedParties, groupLimit = 0, 0

-- setGrouping is openStore's reading of the state.
local function setGrouping(parties, limit) groupedParties, groupLimit = parties, limit end

local function groupsOfLane(lane)
  if lane == 0 then return groupsKey end
  return groupsKey .. ':' .. lane
end

-- line is the list of group's waiters in lane.
local function line(group, lane)
  if group == '' then return laneKey(lane) end
  if lane == 0 then return base .. 'gq:' .. group end
  return base .. 'gq' .. lane .. ':' .. group
end

local function lineOf(token, group) return line(group, laneOf(token)) end

-- memberField names the state's field of group's member in lane's set.
local function memberField(group, lane)
  if lane == 0 then return 'm:' .. group end
  return 'm' .. lane .. ':' .. group
end

local function groupOf(token)
  if groupedParties == 0 then return '' end
  return redis.call('HGET', stateKey, 'g:' .. token) or ''
end

-- The lock's clock fields, read once per call (or with a release's
-- fields, groupFreed): vnow, the clock a group starts at, and lockMean.
local vnow, lockMean
local function readClock()
  if vnow then return end
  local f = redis.call('HMGET', stateKey, 'vnow', 'mean')
  vnow, lockMean = tonumber(f[1]) or 0, tonumber(f[2])
end

local function virtualNow()
  readClock()
  return vnow
end

-- Each group's fields, read once per call, with the lock's clock fields
-- the first time (readClock). lanes are the lanes it has a line in, 0
-- first; members[lane] its member in that lane's groups set, scores[lane]
-- its clock there.
local groups = {}
local function groupRecord(group)
  local r = groups[group]
  if not r then
    local f = redis.call('HMGET', stateKey, 'h:' .. group, 's:' .. group, 'm:' .. group, 'v:' .. group, 'e:' .. group, 'w:' .. group, 'l:' .. group, 'vnow', 'mean')
    if not vnow then vnow, lockMean = tonumber(f[8]) or 0, tonumber(f[9]) end
    r = {held = tonumber(f[1]) or 0, served = f[2] ~= false, clock = tonumber(f[4]), mean = tonumber(f[5]),
         weight = tonumber(f[6]) or 1, lanes = {0}, members = {[0] = f[3] or nil}, scores = {}}
    r.scores[0] = r.members[0] and r.clock
    if f[7] then
      local fields = {}
      for lane in string.gmatch(f[7], '%d') do
        r.lanes[#r.lanes + 1] = tonumber(lane)
        fields[#fields + 1] = memberField(group, tonumber(lane))
      end
      local m = redis.call('HMGET', stateKey, unpack(fields))
      for i = 2, #r.lanes do
        r.members[r.lanes[i]] = m[i - 1] or nil
        r.scores[r.lanes[i]] = m[i - 1] and r.clock
      end
    end
    groups[group] = r
  end
  return r
end

-- setLanes writes the lanes above 0 where group r has a line.
local function setLanes(group, r)
  if #r.lanes == 1 then
    redis.call('HDEL', stateKey, 'l:' .. group)
  else
    redis.call('HSET', stateKey, 'l:' .. group, table.concat(r.lanes, '', 2))
  end
end

-- addLane notes that group r has a line in lane now.
local function addLane(group, r, lane)
  if lane == 0 or r.members[lane] ~= nil then return end
  for _, l in ipairs(r.lanes) do
    if l == lane then return end
  end
  r.lanes[#r.lanes + 1] = lane
  setLanes(group, r)
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

local function clockText(clock) return string.format('%d', clock) end

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
-- lets in, at its clock. Returns whether the line has a head.
local function placeIn(group, r, lane, lineSame)
  local head
  if lineSame and groupLimit == 0 then
    head = r.members[lane] ~= nil
  else
    head = peek(line(group, lane))
  end
  local member, was = nil, r.members[lane]
  if head and (groupLimit == 0 or r.held + weight(head) <= groupLimit) then
    if r.served then
      member = '1:' .. group
    elseif was and lineSame then
      member = was
    else
      member = string.format('0%016d:', arrivalOf(scoreOf(head))) .. group
    end
  end
  if member ~= was then
    if was then redis.call('ZREM', groupsOfLane(lane), was) end
    if member then
      r.clock = r.clock or virtualNow()
      redis.call('HSET', stateKey, memberField(group, lane), member, 'v:' .. group, clockText(r.clock))
    else
      redis.call('HDEL', stateKey, memberField(group, lane))
    end
    r.members[lane], r.scores[lane] = member, nil
  end
  if member and r.scores[lane] ~= r.clock then
    redis.call('ZADD', groupsOfLane(lane), r.clock, member)
    keepGroups(lane)
    r.scores[lane] = r.clock
  end
  return head ~= nil
end

-- place puts group in or out of each lane's groups set where it has a
-- line (placeIn), and forgets a lane where its line is empty. A group
-- with nobody waiting and nothing held is forgotten. lineSame: this call
-- left the group's lines as they were (a release, a charge), so without
-- a limit a head is there exactly when it is placed, and is not read.
local function place(group, lineSame)
  local r = groupRecord(group)
  local waits, lanes = false, {0}
  for _, lane in ipairs(r.lanes) do
    if placeIn(group, r, lane, lineSame) then
      waits = true
      if lane > 0 then lanes[#lanes + 1] = lane end
    end
  end
  if #lanes < #r.lanes then
    r.lanes = lanes
    setLanes(group, r)
  end
  if not waits and r.held == 0 then
    redis.call('HDEL', stateKey, 'h:' .. group, 's:' .. group, 'v:' .. group, 'e:' .. group, 'w:' .. group)
    groups[group] = nil
  end
end

-- A party of group left for good. When it was the last grouped party, the
-- semaphore is one FIFO line again, and forgets the groups: the group ""
-- and group itself (every other group was forgotten as its last party
-- left, by place), and the grant records of the holders left, so that a
-- later stretch of groups starts afresh.
local function partyLeft(token, group)
  redis.call('HDEL', stateKey, 'g:' .. token, 't:' .. token)
  groupedParties = redis.call('HINCRBY', stateKey, 'grouped', -1)
  if groupedParties > 0 then return end
  local gone, sets = {'grouped', 'vnow', 'mean'}, {}
  for _, g in ipairs({'', group}) do
    for _, f in ipairs({'h:', 's:', 'v:', 'e:', 'w:', 'l:'}) do gone[#gone + 1] = f .. g end
  end
  for lane = 0, 9 do
    gone[#gone + 1] = memberField('', lane)
    gone[#gone + 1] = memberField(group, lane)
    sets[#sets + 1] = groupsOfLane(lane)
  end
  redis.call('HDEL', stateKey, unpack(gone))
  redis.call('DEL', unpack(sets))
  local holders = redis.call('ZRANGE', holdersKey, 0, -1)
  for i = 1, #holders, BATCH do
    local fields = {}
    for j = i, math.min(i + BATCH - 1, #holders) do fields[#fields + 1] = 't:' .. holders[j] end
    redis.call('HDEL', stateKey, unpack(fields))
  end
  groups = {}
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
    local first, score = firstWaiter()
    if first and score < 0 then
      local r = groupRecord('')
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
    addLane(group, groupRecord(group), lane)
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

local function nextHead()
  local first, score = firstWaiter()
  if not first then return nil end
  if score < 0 then return pickLane(laneHead) end
  if groupedParties == 0 then return first, '' end
  return laneHead(0)
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

-- groupTook and groupFreed keep a group's permits and clock, for the
-- counted store. A grant charges n × the group's mean hold ÷ its weight,
-- and records when it was made and what it charged.
local function groupTook(token, group, n)
  if groupedParties == 0 then return end
  local r = groupRecord(group)
  r.held = r.held + n
  local clock = r.clock or virtualNow()
  local mean = r.mean
  if not mean then
    readClock()
    mean = lockMean or 0
  end
  local charge = math.max(math.floor(n * mean / r.weight), 1)
  vnow, r.clock, r.served = clock, clock + charge, true
  redis.call('HSET', stateKey, 'h:' .. group, r.held, 's:' .. group, 1,
    'v:' .. group, clockText(r.clock), 'vnow', clockText(clock), 't:' .. token, string.format('%d %d', nowUs(), charge))
  place(group)
end

-- usedSince is what a holder of n permits in a group of weight w has used
-- since µs since.
local function usedSince(n, w, since) return math.floor(n * math.max(nowUs() - since, 0) / w) end

-- A release (or expiry, or death) charges what the grant held, n × µs
-- held ÷ weight, less what was charged for it already, and updates the
-- means of the group and the lock. A holder granted before the groups
-- began has no record, and is charged nothing.
local function groupFreed(token, n)
  if groupedParties == 0 then return end
  local f = redis.call('HMGET', stateKey, 'g:' .. token, 't:' .. token, 'vnow', 'mean')
  if not vnow then vnow, lockMean = tonumber(f[3]) or 0, tonumber(f[4]) end
  local group = f[1] or ''
  local r = groupRecord(group)
  r.held = r.held - n
  if f[2] then
    local since, charged = string.match(f[2], '^(%d+) (%d+)$')
    since = tonumber(since)
    local hold = math.max(nowUs() - since, 0)
    r.mean = r.mean and math.floor(r.mean + (hold - r.mean) / 4) or hold
    lockMean = lockMean and math.floor(lockMean + (hold - lockMean) / 8) or hold
    r.clock = (r.clock or vnow) + usedSince(n, r.weight, since) - tonumber(charged)
    redis.call('HSET', stateKey, 'h:' .. group, r.held, 'v:' .. group, clockText(r.clock), 'e:' .. group, r.mean, 'mean', lockMean)
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
-- was charged for them, once per scan: a hold much longer than its group's
-- mean counts while it lasts, not only once it ends.
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
        r.clock = (r.clock or virtualNow()) + used - tonumber(charged)
        writes[#writes + 1] = 't:' .. token
        writes[#writes + 1] = since .. ' ' .. string.format('%d', used)
        moved[group] = true
      end
    end
  end
  if #writes == 0 then return end
  for group in pairs(moved) do
    writes[#writes + 1] = 'v:' .. group
    writes[#writes + 1] = clockText(groups[group].clock)
  end
  redis.call('HSET', stateKey, unpack(writes))
  for group in pairs(moved) do place(group, true) end
end

local function keepQueue()
  keepFor(queueKey, keepTTL, false)
  keepFor(orderKey, keepTTL, false)
  if groupedParties > 0 then keepFor(groupsKey, keepTTL, false) end
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
    linesKept[lane] = true
  end
end
