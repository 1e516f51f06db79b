-- unlock.lua: free a held lock and pass it on.
-- uses: grant

-- releaseIfHolder frees the lock if token holds it and passes it on.
-- Returns 1 if token held it, 0 otherwise (nothing changed).
local function releaseIfHolder(token, notifyCmd, notifyPrefix)
  if redis.call('GET', lockKey) ~= token then return 0 end
  if not grantNext(notifyCmd, notifyPrefix) then redis.call('DEL', lockKey) end
  return 1
end
