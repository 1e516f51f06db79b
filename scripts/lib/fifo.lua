-- fifo.lua: the waiters' arrival order, kept twice: in a list per line,
-- and in orderKey, a sorted set token -> arrival number (lib/lanes.lua),
-- which serves the head in O(1), tells a waiter's place (ZRANK) and
-- whether a token waits.

-- arrivals are the scores of the tokens this call numbered (scoreOf).
local arrivals = {}

-- arrive numbers token, a waiter of lane, with the server's clock in µs,
-- and at least one above the last waiter (a clock set back must not let a
-- later waiter pass), and appends it to list; returns the list's length.
-- Both keys may be new. The last score is the last waiter of lane 0, or
-- of the others when none of lane 0 waits; a waiter of a lane above 0
-- also reads the last of those (one command, only for them), so that its
-- lane's line stays in arrival order however the clock moves.
local function arrive(list, token, lane)
  local last = redis.call('ZRANGE', orderKey, -1, -1, 'WITHSCORES')
  local at = math.max(last[2] and arrivalOf(tonumber(last[2])) + 1 or 0, nowUs())
  if lane > 0 and last[2] and tonumber(last[2]) >= 0 then
    local lastAbove = redis.call('ZRANGE', orderKey, '(0', '-inf', 'BYSCORE', 'REV', 'LIMIT', 0, 1, 'WITHSCORES')
    if lastAbove[2] then at = math.max(at, arrivalOf(tonumber(lastAbove[2])) + 1) end
  end
  if lane > 0 then at = at - LANE_OFFSET end
  redis.call('ZADD', orderKey, string.format('%d', at), token)
  arrivals[token] = at
  local length = redis.call('RPUSH', list, token)
  -- An empty set or list is no key: one this call filled is new.
  if #last == 0 then keepMade(orderKey, keepTTL) else keepFor(orderKey, keepTTL, false) end
  if length == 1 then keepMade(list, keepTTL) else keepFor(list, keepTTL, false) end
  return length
end

-- scoreOf is the score of token, a waiter.
local function scoreOf(token) return arrivals[token] or tonumber(redis.call('ZSCORE', orderKey, token)) end

-- depart forgets token's arrival; its list entry is the caller's.
local function depart(token) redis.call('ZREM', orderKey, token) end

local function waits(token) return redis.call('ZSCORE', orderKey, token) ~= false end

-- placeOf is token's place in the queue, 1 first, or nil.
local function placeOf(token)
  local rank = redis.call('ZRANK', orderKey, token)
  return rank and rank + 1
end

local function waiting() return redis.call('ZCARD', orderKey) end

-- The head of list is read, not popped, until it is taken or dropped: a
-- pop and push back would delete a one-entry list and make it anew
-- without its TTL.
local function peek(list) return redis.call('LINDEX', list, 0) or nil end

-- pop takes token, the head of list, off it: LREM finds it first.
local function pop(list, token) redis.call('LREM', list, 1, token) end

-- purge removes the tokens of the set dead from list, keeping its order:
-- one LREM each for a few, else the list is written anew, which costs one
-- pass, however many left. A list written anew keeps its TTL if that is
-- longer than keepTTL: another Locker may have given it a longer one.
local function purge(list, dead, count)
  if count <= 8 then
    for token in pairs(dead) do redis.call('LREM', list, 1, token) end
    return
  end
  local kept = {}
  for _, token in ipairs(redis.call('LRANGE', list, 0, -1)) do
    if not dead[token] then kept[#kept + 1] = token end
  end
  local ttl = math.max(redis.call('PTTL', list), keepTTL)
  redis.call('DEL', list)
  for i = 1, #kept, BATCH do
    redis.call('RPUSH', list, unpack(kept, i, math.min(i + BATCH - 1, #kept)))
  end
  if #kept > 0 then redis.call('PEXPIRE', list, ttl) end
end
