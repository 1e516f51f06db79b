-- counted/queue.lua: a semaphore's queue (the functions lib/queue.lua
-- lists), with groups. While no party names a group it is one FIFO line,
-- as the mutex's. Once one does, every group has its own line (the group
-- "" is queueKey, the others base .. 'gq:' .. name), and the next grant
-- goes to the group that holds the fewest permits now; among those, to the
-- one served least recently, a group never served first in its head's
-- arrival order. Within a group, strict FIFO. The state hash keeps:
--   grouped     the parties (waiters and holders) that named a group
--   glimit      the most permits one group may hold (0: no limit)
--   g:<token>   a grouped party's group
--   h:<group>   the permits the group holds
--   s:<group>   when it was last served (SERVED_BASE + tick); absent: never
--   m:<group>   its member in groupsKey, a sorted set (all scores 0) of the
--               groups whose head may be granted, ordered by their members
--               "<held, 10 digits>:<stamp, 16 digits>:<group>"
--   tick        grants made in grouped mode
-- so the next group is the first member, in O(log G) for G groups.

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

-- Each group's fields, read once per call.
local groups = {}
local function groupRecord(group)
  local r = groups[group]
  if not r then
    local f = redis.call('HMGET', stateKey, 'h:' .. group, 's:' .. group, 'm:' .. group)
    r = {held = tonumber(f[1]) or 0, stamp = tonumber(f[2]), member = f[3] or nil}
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

-- place puts group where the grant loop finds it, or takes it out: in
-- groupsKey while it has a head its limit lets in. A group with nobody
-- waiting and nothing held is forgotten.
local function place(group)
  local r = groupRecord(group)
  local head = peek(lineOfGroup(group))
  local member
  if head and (groupLimit == 0 or r.held + weight(head) <= groupLimit) then
    local stamp = r.stamp or tonumber(redis.call('ZSCORE', orderKey, head))
    member = string.format('%010d:%016d:', r.held, stamp) .. group
  end
  if member ~= r.member then
    if r.member then redis.call('ZREM', groupsKey, r.member) end
    if member then
      redis.call('ZADD', groupsKey, 0, member)
      redis.call('HSET', stateKey, 'm:' .. group, member)
      keepFor(groupsKey, keepTTL, true)
    else
      redis.call('HDEL', stateKey, 'm:' .. group)
    end
    r.member = member
  end
  if not head and r.held == 0 then redis.call('HDEL', stateKey, 'h:' .. group, 's:' .. group) end
end

-- A party of group left for good. When it was the last grouped party, the
-- semaphore is one FIFO line again, and forgets the groups: the group ""
-- and group itself (every other group was forgotten as its last party
-- left, by place), so that a later stretch of groups starts afresh.
local function partyLeft(token, group)
  redis.call('HDEL', stateKey, 'g:' .. token)
  groupedParties = redis.call('HINCRBY', stateKey, 'grouped', -1)
  if groupedParties > 0 then return end
  redis.call('HDEL', stateKey, 'grouped', 'tick', 'h:', 's:', 'm:', 'h:' .. group, 's:' .. group, 'm:' .. group)
  redis.call('DEL', groupsKey)
  groups = {}
end

local function join(token, group, held)
  if group == '' then return end
  if groupedParties == 0 then
    -- Every party so far named no group: they are the group "".
    redis.call('HSET', stateKey, 'h:', held)
    keepState(true)
    groups = {}
    place('')
  end
  redis.call('HSET', stateKey, 'g:' .. token, group)
  groupedParties = redis.call('HINCRBY', stateKey, 'grouped', 1)
end

local function enqueue(token, group, held)
  join(token, group, held)
  local length = arrive(lineOfGroup(group), token)
  if groupedParties == 0 then return length end
  place(group)
  return waiting() -- its place in arrival order, among every group's
end

local function nextHead()
  if groupedParties == 0 then return peek(queueKey), '' end
  local member = redis.call('ZRANGE', groupsKey, 0, 0)[1]
  if not member then return nil end
  local group = string.sub(member, 29)
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

-- groupTook and groupFreed keep a group's permits, for the counted store.
local function groupTook(token, group, n)
  if groupedParties == 0 then return end
  local r = groupRecord(group)
  r.held = r.held + n
  r.stamp = SERVED_BASE + redis.call('HINCRBY', stateKey, 'tick', 1)
  redis.call('HSET', stateKey, 'h:' .. group, r.held, 's:' .. group, string.format('%d', r.stamp))
  place(group)
end

local function groupFreed(token, n)
  if groupedParties == 0 then return end
  local group = groupOf(token)
  local r = groupRecord(group)
  r.held = r.held - n
  redis.call('HSET', stateKey, 'h:' .. group, r.held)
  if group ~= '' then partyLeft(token, group) end
  if groupedParties > 0 then place(group) end
end

local function keepQueue()
  keepFor(queueKey, keepTTL, false)
  keepFor(orderKey, keepTTL, false)
  if groupedParties > 0 then keepFor(groupsKey, keepTTL, false) end
end
