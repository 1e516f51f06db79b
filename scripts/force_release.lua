-- force_release.lua: end the current lease, whoever holds it, and grant the
-- lock to the next live waiter as a release would.
-- uses: grant
-- KEYS: lock, queue, alive, fence, order, meta (see lib/keys.lua)
-- ARGV[1] notify command, ARGV[2] notify channel prefix (see lib/grant.lua),
-- ARGV[3] the holder token to end, or "" for whoever holds the lock
-- Reply: {ended token or "", new holder token or "", new fence or 0}; an
-- empty ended token means nothing changed (the lock was free, or held by
-- another token than ARGV[3]).
local holder = redis.call('GET', lockKey)
if not holder or (ARGV[3] ~= '' and holder ~= ARGV[3]) then return {'', '', 0} end
redis.call('HDEL', metaKey, holder)
local granted = grantNext(ARGV[1], ARGV[2])
if not granted then
  redis.call('DEL', lockKey)
  return {holder, '', 0}
end
return {holder, granted, tonumber(redis.call('GET', fenceKey))}
