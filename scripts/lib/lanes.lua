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
  return aging and tonumber(aging) or DEFAULT_AGING_MS
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
