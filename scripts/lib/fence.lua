-- fence.lua: fencing tokens.
-- uses: clock

-- nextFence returns a fence larger than every fence before it. The counter
-- starts from the server's time in microseconds whenever its key is new
-- (first grant, expiry after a day, or a Redis that lost its data), so
-- fences keep growing across such a loss. The fast path INCRs the key
-- outside a script, so a new key may have been counted up from 1 already:
-- any value below 10^12 (µs since 1970 passed it in 1970) is one that was
-- never seeded.
local function nextFence()
  local fence = redis.call('INCR', fenceKey)
  if fence < 1000000000000 then
    nowMs()
    fence = clock[1] * 1000000 + clock[2]
    redis.call('SET', fenceKey, string.format('%d', fence), 'PX', 86400000)
  end
  return fence
end
