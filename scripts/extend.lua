-- extend.lua: set the remaining lease of token's grant to a new TTL.
-- uses: leases keep
-- KEYS: lock, queue, alive, fence, order, meta[, state] (see lib/keys.lua)
-- ARGV[1] token, ARGV[2] TTL ms, ARGV[3] "1" if token has metadata, else ""
-- Reply: 1 extended; 0 token holds nothing (nothing changed but its
-- metadata dropped: the token has left).
if not renew(ARGV[1], tonumber(ARGV[2]), false) then
  if ARGV[3] ~= '' then redis.call('HDEL', metaKey, ARGV[1]) end
  return 0
end
-- The metadata lives as long as the lease, however long that is made; the
-- hash is not new, since it holds token's entry.
if ARGV[3] ~= '' then keepFor(metaKey, tonumber(ARGV[2]), false) end
return 1
