-- grant.lua: hand the lock to the next live waiter.
-- uses: clock fence

-- grantNext hands the lock to the first live waiter, dropping dead ones
-- on the way, and notifies the waiter's Locker. The lock lives only until the
-- waiter's own heartbeat deadline: a waiter that died just before its turn
-- holds it no longer than it would have kept its place. Its Locker extends
-- the lease at its next heartbeat. The waiter's metadata stays under its
-- token, now the holder's; a dead waiter's is dropped with it. The message
-- goes with notifyCmd (PUBLISH, or SPUBLISH on Redis Cluster) to
-- notifyPrefix .. the waiter's Locker id.
-- The new holder overwrites the lock rather than following a DEL: during a
-- Redis Cluster slot migration a script fails at the first key it touches
-- that no longer exists, and must not stop between the two.
-- Returns the new holder's token, or false.
local function grantNext(notifyCmd, notifyPrefix)
  while true do
    local head = redis.call('LPOP', queueKey)
    if not head then return false end
    local deadline = tonumber(redis.call('ZSCORE', aliveKey, head))
    redis.call('ZREM', aliveKey, head)
    redis.call('ZREM', orderKey, head)
    if deadline and deadline > nowMs() then
      redis.call('SET', lockKey, head, 'PX', deadline - nowMs())
      local fence = nextFence()
      local locker = string.match(head, '^(.*):')
      redis.call(notifyCmd, notifyPrefix .. locker, head .. ' ' .. string.format('%d', fence))
      return head
    end
    redis.call('HDEL', metaKey, head)
  end
end
