-- grant.lua: the queue engine's grant loop, for every holder store.

-- grantHeads grants, in queue order, every live request at the head that
-- fits, and stops at the first that does not: a later request never passes
-- an earlier one, even when it would fit, or a large request (a writer)
-- could wait forever behind a stream of small ones. Dead waiters met on the
-- way are dropped. A grant's record lives as long as its waiter's session
-- asks (grantTTL), and the grant as long as the waiter does until its
-- Locker takes it up (markGranted), but for the token quiet, whose caller
-- takes it up from the reply; the waiter's metadata stays under its token,
-- now a holder's. Each Locker with a granted waiter gets one message, "token
-- fence token fence ...", with notifyCmd to notifyPrefix .. its Locker id,
-- but for the token quiet, whose caller reads its grant in the reply.
-- Returns the grants, {token, fence, ...}, or nil when there were none.
local function grantHeads(quiet)
  if not hasRoom() then return nil end
  -- The messages, by Locker: most calls grant one waiter, for which first
  -- and its message need no table.
  local grants, firstLocker, firstMessage, messages
  while true do
    local head, group = nextHead()
    if not head then break end
    local ttl = grantTTL(head)
    if ttl and not fits(head, group) then break end
    popHead(head, group)
    if ttl then
      local fence = nextFence()
      local more = take(head, group, ttl, fence)
      if head ~= quiet then
        markGranted(head)
        local locker = lockerOf(head)
        local grant = head .. ' ' .. string.format('%d', fence)
        if not firstLocker then
          firstLocker, firstMessage = locker, grant
        elseif locker == firstLocker then
          firstMessage = firstMessage .. ' ' .. grant
        else
          messages = messages or {}
          messages[locker] = messages[locker] and messages[locker] .. ' ' .. grant or grant
        end
      end
      grants = grants or {}
      grants[#grants + 1] = head
      grants[#grants + 1] = fence
      if not more then break end
    else
      waiterLeft(head, group)
    end
  end
  if firstLocker then redis.call(notifyCmd, notifyPrefix .. firstLocker, firstMessage) end
  if messages then
    for locker, message in pairs(messages) do redis.call(notifyCmd, notifyPrefix .. locker, message) end
  end
  return grants
end
