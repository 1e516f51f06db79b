-- extend.lua: set the remaining lease of token's lock to a new TTL.
-- uses: keep
-- KEYS: lock, queue, alive, fence, meta (see lib/keys.lua)
-- ARGV[1] token, ARGV[2] TTL ms, ARGV[3] "1" if token has metadata, whose
-- entry must then live as long as the lease, else ""
-- Reply: 1 extended; 0 token does not hold the lock (nothing changed).
if redis.call('GET', lockKey) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', lockKey, ARGV[2])
if ARGV[3] ~= '' then keepFor(metaKey, tonumber(ARGV[2])) end
return 1
