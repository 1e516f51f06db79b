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
    local waitLeft = left(sessionPrefix .. sessionOf(token) .. 'WAITERS_KEY_SUFFIX')
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
