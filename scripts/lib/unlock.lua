-- unlock.lua: free a held lock and pass it on.
-- uses: grant

-- releaseIfHolder frees the lock if token holds it and passes it on. It
-- drops token's metadata if hasMeta is not "" (the caller gave some): a
-- token without any costs no command for it.
-- Returns 1 if token held it, 0 otherwise (nothing else changed).
local function releaseIfHolder(token, notifyCmd, notifyPrefix, hasMeta)
  if hasMeta ~= '' then redis.call('HDEL', metaKey, token) end
  if redis.call('GET', lockKey) ~= token then return 0 end
  if not grantNext(notifyCmd, notifyPrefix) then redis.call('DEL', lockKey) end
  return 1
end
