-- lib.lua is prepended to every other script; it is not run alone.
-- Every script gets the same four keys of one lock, which share one hash tag:
--   KEYS[1] lock   string: the holder's token, with the lease as its TTL
--   KEYS[2] queue  list: waiter tokens in arrival order (the holder is not in it)
--   KEYS[3] alive  sorted set: waiter token -> server-clock deadline in ms
--   KEYS[4] fence  string: the last fence handed out
-- Every deadline comes from the server's TIME, never a client clock.
local lockKey, queueKey, aliveKey, fenceKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
-- The fence key may expire: fences are seeded from the clock, so they still grow.
local fenceTTL = 86400000

-- serverTime is the server's TIME, read once and only when needed: a plain
-- release reads no clock.
local clock
local function serverTime()
  if not clock then clock = redis.call('TIME') end
  return clock
end

-- nowMs is the server's time in milliseconds.
local function nowMs()
  local t = serverTime()
  return t[1] * 1000 + math.floor(t[2] / 1000)
end

-- nextFence returns a fence larger than every fence before it. The counter
-- starts from the server's time in microseconds whenever its key is new, so
-- fences keep growing after the key expired or Redis lost its data.
local function nextFence()
  local fence = redis.call('INCR', fenceKey)
  if fence == 1 then
    local t = serverTime()
    fence = t[1] * 1000000 + t[2]
    redis.call('SET', fenceKey, string.format('%d', fence), 'PX', fenceTTL)
  end
  return fence
end

-- keepFor makes key live at least ttl ms more, never shortening it.
local function keepFor(key, ttl)
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
end

-- grantNext hands the lock to the first live waiter, dropping dead ones
-- on the way, and notifies the waiter's Locker. The lock lives only until the
-- waiter's own heartbeat deadline: a waiter that died just before its turn
-- holds it no longer than it would have kept its place. Its Locker extends
-- the lease at its next heartbeat. The message goes with notifyCmd (PUBLISH,
-- or SPUBLISH on Redis Cluster) to notifyPrefix .. the waiter's Locker id.
-- Returns the new holder's token, or false.
local function grantNext(notifyCmd, notifyPrefix)
  while true do
    local head = redis.call('LPOP', queueKey)
    if not head then return false end
    local deadline = tonumber(redis.call('ZSCORE', aliveKey, head))
    redis.call('ZREM', aliveKey, head)
    if deadline and deadline > nowMs() then
      redis.call('SET', lockKey, head, 'PX', deadline - nowMs())
      local fence = nextFence()
      local locker = string.match(head, '^(.*):')
      redis.call(notifyCmd, notifyPrefix .. locker, head .. ' ' .. string.format('%d', fence))
      return head
    end
  end
end

-- releaseIfHolder frees the lock if token holds it and passes it on. The
-- next holder overwrites the lock rather than following a DEL: during a
-- Redis Cluster slot migration a script fails at the first key it touches
-- that no longer exists, and must not stop between the two.
local function releaseIfHolder(token, notifyCmd, notifyPrefix)
  if redis.call('GET', lockKey) ~= token then return 0 end
  if not grantNext(notifyCmd, notifyPrefix) then redis.call('DEL', lockKey) end
  return 1
end
