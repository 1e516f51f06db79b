-- grant.lua: the queue engine's grant loop, for every holder store.
-- uses: clock fence store

-- grantHeads grants, in queue order, every live request at the head that
-- fits, and stops at the first that does not: a later request never passes
-- an earlier one, even when it would fit, or a large request (a writer)
-- could wait forever behind a stream of small ones. Dead entries met on the
-- way are dropped, with their metadata. A grant lives only until the
-- waiter's own heartbeat deadline: a waiter that died just before its turn
-- holds it no longer than it would have kept its place, and its Locker
-- extends the lease at its next heartbeat. The waiter's metadata stays
-- under its token, now a holder's.
-- Each Locker with a granted waiter gets one message, "token fence token
-- fence ...", with notifyCmd (PUBLISH, or SPUBLISH on Redis Cluster) to
-- notifyPrefix .. its Locker id (the token up to its first ':').
-- Returns the first token granted, or false.
local function grantHeads(notifyCmd, notifyPrefix)
  if not hasRoom() then return false end
  -- The messages, by Locker: most scripts grant one waiter, for which
  -- first and its message need no table.
  local first, firstLocker, firstMessage, messages = false, nil, nil, nil
  while true do
    local head = redis.call('LPOP', queueKey)
    if not head then break end
    local deadline = tonumber(redis.call('ZSCORE', aliveKey, head))
    local live = deadline and deadline > nowMs()
    if live and not fits(head) then
      redis.call('LPUSH', queueKey, head)
      break
    end
    redis.call('ZREM', aliveKey, head)
    redis.call('ZREM', orderKey, head)
    if live then
      local fence = nextFence()
      local more = take(head, deadline - nowMs(), fence)
      local locker = string.match(head, '^([^:]*):')
      local grant = head .. ' ' .. string.format('%d', fence)
      if not first then
        first, firstLocker, firstMessage = head, locker, grant
      elseif locker == firstLocker then
        firstMessage = firstMessage .. ' ' .. grant
      else
        messages = messages or {}
        messages[locker] = messages[locker] and messages[locker] .. ' ' .. grant or grant
      end
      if not more then break end
    else
      redis.call('HDEL', metaKey, head)
    end
  end
  if first then redis.call(notifyCmd, notifyPrefix .. firstLocker, firstMessage) end
  if messages then
    for locker, message in pairs(messages) do redis.call(notifyCmd, notifyPrefix .. locker, message) end
  end
  return first
end
