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
  redis.call('SET', key, string.format('%d', fence), 'PX', FENCE_TTL_MS)
  return fence
end

local function nextFence() return drawFence(fenceKey) end

local function lastFence() return tonumber(redis.call('GET', fenceKey) or '0') end
