-- heartbeat.lua: one call per Locker, lock and period, for all its parties:
-- keeps its waiters alive, renews its lease, re-checks grants whose message
-- may have been lost, grants a lock whose holder expired unreleased, drops
-- dead waiters of any Locker wherever they stand, and tells each waiter its
-- place when asked.
-- uses: grant keep
-- KEYS: lock, queue, alive, fence, order (see lib/keys.lua)
-- ARGV[1] waiter TTL ms, ARGV[2] lease TTL ms, ARGV[3] notify command,
-- ARGV[4] notify channel prefix, ARGV[5] holder token to renew, or "" for
-- none, ARGV[6] "1" to count the waiters' places, else "0", ARGV[7..]
-- waiter tokens
-- Reply: {held, s1, s2, ...}: held is 1 if ARGV[5] still holds the lock
-- (renewed) and 0 otherwise; si is, for waiter token i, the fence if it was
-- granted, 0 if it is no longer queued (it lost its place), and if it still
-- waits -position (1 is next) when asked, else -1.
local waiterTTL, leaseTTL = tonumber(ARGV[1]), tonumber(ARGV[2])
local holder = redis.call('GET', lockKey)
local reply = {0}
if ARGV[5] ~= '' and holder == ARGV[5] then
  keepFor(lockKey, leaseTTL, false)
  reply[1] = 1
end
if not holder then holder = grantNext(ARGV[3], ARGV[4]) end
-- Each command takes up to `batch` tokens, below Lua's limit on unpack(),
-- so a Locker with thousands of waiters costs a few commands, not thousands.
local batch = 1000
local function eachBatch(list, step, fn)
  for i = 1, #list, step do fn(unpack(list, i, math.min(i + step - 1, #list))) end
end
local tokens = {unpack(ARGV, 7)}
local positions = ARGV[6] == '1'
local deadlines = {}
eachBatch(tokens, batch, function(...)
  for _, d in ipairs(redis.call('ZMSCORE', aliveKey, ...)) do deadlines[#deadlines + 1] = d end
end)
-- Dead waiters, this Locker's or any other's, leave the places count now;
-- their list entries stay until grantNext reaches and skips them.
local expired = redis.call('ZRANGEBYSCORE', aliveKey, '-inf', nowMs(), 'LIMIT', 0, batch)
if #expired > 0 then
  redis.call('ZREM', aliveKey, unpack(expired))
  redis.call('ZREM', orderKey, unpack(expired))
end
local renew = {}
for i, token in ipairs(tokens) do
  local deadline = tonumber(deadlines[i])
  local status = 0
  if token == holder then
    -- Granted, and its message may be lost.
    status = tonumber(redis.call('GET', fenceKey) or '1')
  elseif deadline and deadline > nowMs() then
    renew[#renew + 1] = nowMs() + waiterTTL
    renew[#renew + 1] = token
    status = -1
    if positions then
      local rank = redis.call('ZRANK', orderKey, token)
      if rank then status = -(rank + 1) end
    end
  end
  reply[#reply + 1] = status
end
eachBatch(renew, 2 * batch, function(...) redis.call('ZADD', aliveKey, ...) end)
if #tokens > 0 then
  keepFor(queueKey, waiterTTL, true)
  keepFor(aliveKey, waiterTTL, true)
  keepFor(orderKey, waiterTTL, true)
end
return reply
