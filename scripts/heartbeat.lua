-- heartbeat.lua: one call per Locker, lock and period, for all its parties:
-- keeps its waiters alive, renews its leases, re-checks grants whose message
-- may have been lost, grants what holders that expired unreleased left,
-- drops dead waiters of any Locker wherever they stand, tells each waiter
-- its place when asked, and drops the metadata of tokens that left without
-- saying so.
-- uses: grant keep leases
-- KEYS: lock, queue, alive, fence, order, meta[, state] (see lib/keys.lua)
-- ARGV[1] waiter TTL ms, ARGV[2] lease TTL ms, ARGV[3] notify command,
-- ARGV[4] notify channel prefix, ARGV[5] "1" to count the waiters' places,
-- else "0", ARGV[6] the capacity (semaphore and read-write lock; "" for a
-- mutex), ARGV[7] h, the number of holder tokens to renew, ARGV[8..7+h]
-- those tokens, ARGV[8+h..] waiter tokens
-- Reply: {held1, ..., heldh, s1, s2, ...}: heldi is 1 if holder token i
-- still holds its permits (renewed) and 0 otherwise; si is, for waiter
-- token i, the fence if it was granted, 0 if it is no longer queued (it
-- lost its place), and if it still waits -position (1 is next) when asked,
-- else -1.
local waiterTTL, leaseTTL = tonumber(ARGV[1]), tonumber(ARGV[2])
openStore(tonumber(ARGV[6]), false, math.max(waiterTTL, leaseTTL))
local reply = {}
-- Tokens found gone here: their metadata goes too.
local gone = {}
local holders = tonumber(ARGV[7])
for i = 1, holders do
  local token = ARGV[7 + i]
  if renew(token, leaseTTL, true) then
    reply[i] = 1
  else
    reply[i] = 0
    gone[#gone + 1] = token
  end
end
grantHeads(ARGV[3], ARGV[4])
-- Each command takes up to `batch` tokens, below Lua's limit on unpack(),
-- so a Locker with thousands of waiters costs a few commands, not thousands.
local batch = 1000
local function eachBatch(list, step, fn)
  for i = 1, #list, step do fn(unpack(list, i, math.min(i + step - 1, #list))) end
end
local tokens = {unpack(ARGV, 8 + holders)}
local positions = ARGV[5] == '1'
local deadlines = {}
eachBatch(tokens, batch, function(...)
  for _, d in ipairs(redis.call('ZMSCORE', aliveKey, ...)) do deadlines[#deadlines + 1] = d end
end)
-- Dead waiters, this Locker's or any other's, leave the places count now;
-- their list entries stay until grantHeads reaches and skips them.
local expired = redis.call('ZRANGEBYSCORE', aliveKey, '-inf', nowMs(), 'LIMIT', 0, batch)
if #expired > 0 then
  redis.call('ZREM', aliveKey, unpack(expired))
  redis.call('ZREM', orderKey, unpack(expired))
  for _, token in ipairs(expired) do gone[#gone + 1] = token end
end
local alive = {}
for i, token in ipairs(tokens) do
  local deadline = tonumber(deadlines[i])
  local status = 0
  if deadline and deadline > nowMs() then
    alive[#alive + 1] = nowMs() + waiterTTL
    alive[#alive + 1] = token
    status = -1
    if positions then
      local rank = redis.call('ZRANK', orderKey, token)
      if rank then status = -(rank + 1) end
    end
  elseif holds(token) then
    -- Granted, and its message may be lost.
    status = fenceOf(token)
  else
    gone[#gone + 1] = token
  end
  reply[#reply + 1] = status
end
eachBatch(alive, 2 * batch, function(...) redis.call('ZADD', aliveKey, ...) end)
if #tokens > 0 then
  keepFor(queueKey, waiterTTL, true)
  keepFor(aliveKey, waiterTTL, true)
  keepFor(orderKey, waiterTTL, true)
end
-- Metadata: one HLEN when nobody gave any. A mutex holder that died leaves
-- its entry behind, named by nobody. When the hash has more entries than
-- the holders' and one per waiter, it holds such leftovers, and every entry
-- of neither holder nor waiter is dropped: leftovers never outnumber the
-- parties without metadata, and go at the first heartbeat after the queue
-- shrinks. The hash lives as long as the longest lease or waiter it serves.
if redis.call('HLEN', metaKey) > 0 then
  eachBatch(gone, batch, function(...) redis.call('HDEL', metaKey, ...) end)
  local owners = redis.call('ZCARD', aliveKey) + metaOwners()
  if redis.call('HLEN', metaKey) > owners then
    local fields = redis.call('HKEYS', metaKey)
    local orphans = {}
    for i = 1, #fields, batch do
      local part = {unpack(fields, i, math.min(i + batch - 1, #fields))}
      local scores = redis.call('ZMSCORE', aliveKey, unpack(part))
      for j, token in ipairs(part) do
        if not scores[j] and not holds(token) then orphans[#orphans + 1] = token end
      end
    end
    eachBatch(orphans, batch, function(...) redis.call('HDEL', metaKey, ...) end)
  end
  keepFor(metaKey, math.max(waiterTTL, leaseTTL), true)
end
return reply
