-- fence.lua: fencing tokens.

-- nextFence returns a fence larger than every fence before it. The counter
-- starts from the server's time in microseconds whenever its key is new
-- (first grant, expiry, or a Redis that lost its data), so fences keep
-- growing across such a loss. The Go fast path INCRs the key outside a
-- script, so a new key may have been counted up from 1 already: a value
-- below FENCE_FLOOR (µs since 1970 passed it in 1970) was never seeded.
local function nextFence()
  local fence = redis.call('INCR', fenceKey)
  if fence < FENCE_FLOOR then
    fence = nowUs()
    redis.call('SET', fenceKey, string.format('%d', fence), 'PX', FENCE_TTL_MS)
  end
  return fence
end

local function lastFence() return tonumber(redis.call('GET', fenceKey) or '0') end
