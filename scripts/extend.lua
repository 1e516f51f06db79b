-- extend.lua: set the remaining lease of token's lock to a new TTL.
-- KEYS: lock, queue, alive, fence, order (see lib/keys.lua)
-- ARGV[1] token, ARGV[2] TTL ms
-- Reply: 1 extended; 0 token does not hold the lock (nothing changed).
if redis.call('GET', lockKey) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', lockKey, ARGV[2])
return 1
