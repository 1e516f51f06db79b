-- heartbeat.lua: one call per Locker, lock and period, for all its parties:
-- keeps its waiters alive, renews its lease, re-checks grants whose message
-- may have been lost, grants a lock whose holder expired unreleased, drops
-- dead waiters of any Locker wherever they stand, tells each waiter its
-- place when asked, and drops the metadata of tokens that left without
-- saying so.
-- uses: grant keep
-- KEYS: lock, queue, alive, fence, order, meta (see lib/keys.lua)
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
-- Tokens found gone here: their metadata goes too.
local gone = {}
if ARGV[5] ~= '' and holder == ARGV[5] then
  keepFor(lockKey, leaseTTL, false)
  reply[1] = 1
elseif ARGV[5] ~= '' then
  gone[1] = ARGV[5]
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
  for _, token in ipairs(expired) do gone[#gone + 1] = token end
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
  else
    gone[#gone + 1] = token
  end
  reply[#reply + 1] = status
end
eachBatch(renew, 2 * batch, function(...) redis.call('ZADD', aliveKey, ...) end)
if #tokens > 0 then
  keepFor(queueKey, waiterTTL, true)
  keepFor(aliveKey, waiterTTL, true)
  keepFor(orderKey, waiterTTL, true)
end
-- Metadata: one HLEN when nobody gave any. A holder that died leaves its
-- entry behind, named by nobody. When the hash has more entries than the
-- holder's and one per waiter, it holds such leftovers, and every entry of
-- neither holder nor waiter is dropped: leftovers never outnumber the
-- waiters without metadata, and go at the first heartbeat after the queue
-- shrinks. The hash lives as long as the longest lease or waiter it serves.
if redis.call('HLEN', metaKey) > 0 then
  eachBatch(gone, batch, function(...) redis.call('HDEL', metaKey, ...) end)
  local owners = redis.call('ZCARD', aliveKey)
  if holder then owners = owners + redis.call('HEXISTS', metaKey, holder) end
  if redis.call('HLEN', metaKey) > owners then
    local fields = redis.call('HKEYS', metaKey)
    local orphans = {}
    for i = 1, #fields, batch do
      local part = {unpack(fields, i, math.min(i + batch - 1, #fields))}
      local scores = redis.call('ZMSCORE', aliveKey, unpack(part))
      for j, token in ipairs(part) do
        if token ~= holder and not scores[j] then orphans[#orphans + 1] = token end
      end
    end
    eachBatch(orphans, batch, function(...) redis.call('HDEL', metaKey, ...) end)
  end
  keepFor(metaKey, math.max(waiterTTL, leaseTTL), true)
end
return reply
