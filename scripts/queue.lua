-- queue.lua: the holder and the live waiters of one lock, read-only.
-- Waiters whose heartbeat deadline has passed (dead, not yet reaped) are
-- skipped: they will never be granted, and positions count only live ones.
-- uses: clock
-- KEYS: lock, queue, alive, fence, order, meta (see lib/keys.lua)
-- ARGV[1] the most waiters to list; the scan stops after 10 times as many
-- queue entries, so a queue full of dead entries cannot stall Redis.
-- Reply: {holder token or "", lease left ms (or -2), last fence or 0,
--         live waiters in all, the holder's metadata or "",
--         {token1, ms left to its deadline, metadata or "", token2, ...}}
local limit = tonumber(ARGV[1])
local now = nowMs()
local live = redis.call('ZCOUNT', aliveKey, '(' .. now, '+inf')
local listed = {}
local from = 0
while #listed < 3 * math.min(limit, live) and from < 10 * limit do
  local page = redis.call('LRANGE', queueKey, from, from + limit - 1)
  if #page == 0 then break end
  local deadlines = redis.call('ZMSCORE', aliveKey, unpack(page))
  local metas = redis.call('HMGET', metaKey, unpack(page))
  for i, token in ipairs(page) do
    local deadline = tonumber(deadlines[i])
    if deadline and deadline > now and #listed < 3 * limit then
      listed[#listed + 1] = token
      listed[#listed + 1] = deadline - now
      listed[#listed + 1] = metas[i] or ''
    end
  end
  from = from + limit
end
local holder = redis.call('GET', lockKey) or ''
local meta = ''
if holder ~= '' then meta = redis.call('HGET', metaKey, holder) or '' end
return {holder, redis.call('PTTL', lockKey), tonumber(redis.call('GET', fenceKey) or '0'), live,
  meta, listed}
