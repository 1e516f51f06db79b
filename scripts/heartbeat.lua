-- heartbeat.lua: one call per Locker, lock and period, for all its parties:
-- keeps its waiters alive, renews its lease, re-checks grants whose message
-- may have been lost, and grants a lock whose holder expired unreleased.
-- KEYS: lock, queue, alive, fence (see lib.lua)
-- ARGV[1] waiter TTL ms, ARGV[2] lease TTL ms, ARGV[3] notify command,
-- ARGV[4] notify channel prefix, ARGV[5] holder token to renew, or "" for
-- none, ARGV[6..] waiter tokens
-- Reply: {held, s1, s2, ...}: held is 1 if ARGV[5] still holds the lock
-- (renewed) and 0 otherwise; si is, for waiter token i, 0 still waiting,
-- -1 no longer queued (it lost its place), or the fence if it was granted.
local waiterTTL, leaseTTL = tonumber(ARGV[1]), tonumber(ARGV[2])
local holder = redis.call('GET', lockKey)
local reply = {0}
if ARGV[5] ~= '' and holder == ARGV[5] then
  keepFor(lockKey, leaseTTL)
  reply[1] = 1
end
if not holder then holder = grantNext(ARGV[3], ARGV[4]) end
for i = 6, #ARGV do
  local token = ARGV[i]
  local status = -1
  if token == holder then
    status = tonumber(redis.call('GET', fenceKey) or '1')
  else
    local deadline = tonumber(redis.call('ZSCORE', aliveKey, token))
    if deadline and deadline > nowMs then
      redis.call('ZADD', aliveKey, nowMs + waiterTTL, token)
      status = 0
    elseif deadline then
      -- Too late: it stays in the list as a dead entry that grantNext skips.
      redis.call('ZREM', aliveKey, token)
    end
  end
  reply[#reply + 1] = status
end
if #ARGV >= 6 then
  keepFor(queueKey, waiterTTL)
  keepFor(aliveKey, waiterTTL)
end
return reply
