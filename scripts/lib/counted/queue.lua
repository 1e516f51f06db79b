-- counted/queue.lua: a semaphore's queue (the functions lib/queue.lua
-- lists), with groups. While no party names a group it is one FIFO line,
-- as the mutex's. Once one does, every group has its own line (the group
-- "" is queueKey, the others base .. 'gq:' .. name), and the next grant
-- goes to the group with the lowest virtual clock: the permit-time
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
--   m:<group>   its member in groupsKey, while it is there: a sorted set
--               of the groups whose head may be granted, scored by clock;
--               the member is "1:<group>" once served, before that
--               "0<its head's arrival, 16 digits>:<group>"
-- so the next group is the first member, in O(log G) for G groups. A
-- grant moves its group's score (one ZADD), not its member.

local base = string.sub(stateKey, 1, -6)
local groupsKey = base .. 'groups'
local groupedParties, groupLimit = 0, 0

-- setGrouping is openStore's reading of the state.
local function setGrouping(parties, limit) groupedParties, groupLimit = parties, limit end

local function lineOfGroup(group)
  if group == '' then return queueKey end
  return base .. 'gq:' .. group
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

-- Each group's fields, read once per call. score is its clock in
-- groupsKey, when it has a member there.
local groups = {}
local function groupRecord(group)
  local r = groups[group]
  if not r then
    local f = redis.call('HMGET', stateKey, 'h:' .. group, 's:' .. group, 'm:' .. group, 'v:' .. group, 'e:' .. group, 'w:' .. group)
    r = {held = tonumber(f[1]) or 0, served = f[2] ~= false, member = f[3] or nil, clock = tonumber(f[4]),
         mean = tonumber(f[5]), weight = tonumber(f[6]) or 1}
    r.score = r.member and r.clock
    groups[group] = r
  end
  return r
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

-- keepGroups keeps groupsKey keepTTL ms more, once per call that moves a
-- score: a member that stays may belong to a Locker with longer TTLs than
-- the one whose call made the key, and must not outlive it.
local groupsKept = false
local function keepGroups()
  if groupsKept then return end
  keepFor(groupsKey, keepTTL, true)
  groupsKept = true
end

-- place puts group where the grant loop finds it, or takes it out: in
-- groupsKey while it has a head its limit lets in, at its clock. A group
-- with nobody waiting and nothing held is forgotten. lineSame: this call
-- left the group's line as it was (a release, a charge), so without a
-- limit its head is there exactly when it is placed, and is not read.
local function place(group, lineSame)
  local r = groupRecord(group)
  local head
  if lineSame and groupLimit == 0 then
    head = r.member ~= nil
  else
    head = peek(lineOfGroup(group))
  end
  local member
  if head and (groupLimit == 0 or r.held + weight(head) <= groupLimit) then
    if r.served then
      member = '1:' .. group
    elseif r.member and lineSame then
      member = r.member
    else
      member = string.format('0%016d:', tonumber(redis.call('ZSCORE', orderKey, head))) .. group
    end
  end
  if member ~= r.member then
    if r.member then redis.call('ZREM', groupsKey, r.member) end
    if member then
      r.clock = r.clock or virtualNow()
      redis.call('HSET', stateKey, 'm:' .. group, member, 'v:' .. group, clockText(r.clock))
    else
      redis.call('HDEL', stateKey, 'm:' .. group)
    end
    r.member, r.score = member, nil
  end
  if member and r.score ~= r.clock then
    redis.call('ZADD', groupsKey, r.clock, member)
    keepGroups()
    r.score = r.clock
  end
  if not head and r.held == 0 then
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
  redis.call('HDEL', stateKey, 'grouped', 'vnow', 'mean', 'h:', 's:', 'm:', 'v:', 'e:',
    'h:' .. group, 's:' .. group, 'm:' .. group, 'v:' .. group, 'e:' .. group, 'w:' .. group)
  redis.call('DEL', groupsKey)
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
    -- Every party so far named no group: they are the group "".
    redis.call('HSET', stateKey, 'h:', held)
    keepState(true)
    groups = {}
    place('')
  end
  redis.call('HSET', stateKey, 'g:' .. token, group, 'w:' .. group, weight)
  if groups[group] then groups[group].weight = weight end
  groupedParties = redis.call('HINCRBY', stateKey, 'grouped', 1)
end

-- enqueue returns token's place in arrival order, or, with groups, nil:
-- its place among every group's costs a command, for whoever asks.
-- Joining a line with a head changes nothing of the group's.
local function enqueue(token, group, held, weight)
  join(token, group, held, weight)
  local length = arrive(lineOfGroup(group), token)
  if groupedParties == 0 then return length end
  if length == 1 then place(group) end
  return nil
end

local function nextHead()
  if groupedParties == 0 then return peek(queueKey), '' end
  local member = redis.call('ZRANGE', groupsKey, 0, 0)[1]
  if not member then return nil end
  local group = string.sub(member, string.find(member, ':', 1, true) + 1)
  return peek(lineOfGroup(group)), group
end

local function popHead(token, group)
  pop(lineOfGroup(group))
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
  local queued = redis.call('LREM', lineOfGroup(group), 1, token) == 1
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
