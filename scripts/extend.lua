-- extend.lua: set the remaining lease of token's lock to a new TTL.
-- uses: keep
-- KEYS: lock, queue, alive, fence, order, meta (see lib/keys.lua)
-- ARGV[1] token, ARGV[2] TTL ms, ARGV[3] "1" if token has metadata, else ""
-- Reply: 1 extended; 0 token does not hold the lock (nothing changed but its
-- metadata dropped: the token has left).
if redis.call('GET', lockKey) ~= ARGV[1] then
  if ARGV[3] ~= '' then redis.call('HDEL', metaKey, ARGV[1]) end
  return 0
end
redis.call('PEXPIRE', lockKey, ARGV[2])
-- The metadata lives as long as the lease, however long that is made; the
-- hash is not new, since it holds token's entry.
if ARGV[3] ~= '' then keepFor(metaKey, tonumber(ARGV[2]), false) end
return 1
