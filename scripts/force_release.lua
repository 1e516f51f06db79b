-- force_release.lua: end the current lease of a mutex, whoever holds it,
-- and grant the lock to the next live waiter as a release would.
-- uses: grant leases
-- KEYS: lock, queue, alive, fence, order, meta (see lib/keys.lua)
-- ARGV[1] notify command, ARGV[2] notify channel prefix (see lib/grant.lua),
-- ARGV[3] the holder token to end, or "" for whoever holds the lock
-- Reply: {ended token or "", new holder token or "", new fence or 0}; an
-- empty ended token means nothing changed (the lock was free, or held by
-- another token than ARGV[3]).
local ended = redis.call('GET', lockKey)
if not ended or (ARGV[3] ~= '' and ended ~= ARGV[3]) then return {'', '', 0} end
redis.call('HDEL', metaKey, ended)
drop(ended)
local granted = grantHeads(ARGV[1], ARGV[2])
settle()
if not granted then return {ended, '', 0} end
return {ended, granted, fenceOf(granted)}
